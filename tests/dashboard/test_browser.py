"""The dashboard in a real headless Chromium (Debian's ``chromium`` + ``chromium-driver``).

``make test`` installs them where apt-get can; without them these tests skip, saying so.
Screenshots go to ``test-artifacts/dashboard/`` (or ``$FASTTUNE_TEST_ARTIFACTS``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.experiments import iterations_of

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARTIFACTS = os.environ.get("FASTTUNE_TEST_ARTIFACTS", os.path.join(ROOT, "test-artifacts"))

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
pytest.importorskip("starlette")
if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
    pytest.skip(
        "no Chromium: install Debian's chromium and chromium-driver (make test does it "
        "with apt-get when it can)",
        allow_module_level=True,
    )

from selenium.common.exceptions import (  # noqa: E402
    NoSuchElementException,
    StaleElementReferenceException,
)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(root: str, *extra: str) -> tuple[subprocess.Popen, str]:
    """``fasttune dashboard root`` in its own process; its base URL once it answers."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "fasttune", "dashboard", root, "--port", str(port), *extra],
        stdout=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(base + "/static/dashboard.js", timeout=2).read()
            return process, base
        except urllib.error.HTTPError:
            return process, base  # answering (401 with a token)
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"the dashboard exited with {process.returncode}") from None
            time.sleep(0.1)
    process.kill()
    raise TimeoutError("the dashboard did not answer in 30 s")


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdout:
        process.stdout.close()


@pytest.fixture(scope="module")
def server(project):
    process, base = start_server(project)
    yield base
    stop(process)


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                 "--window-size=1400,1000"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(DRIVER))
    yield driver
    driver.quit()


def screenshot(driver, name: str) -> None:
    folder = os.path.join(ARTIFACTS, "dashboard")
    os.makedirs(folder, exist_ok=True)
    driver.save_screenshot(os.path.join(folder, f"{name}.png"))


def wait(driver, condition, timeout: float = 20):
    return WebDriverWait(driver, timeout).until(lambda d: condition(d))


def click(driver, by: str, value: str) -> None:
    """Click an element of the trials table, which is redrawn every 1.5 s (retry if stale)."""

    def attempt(d) -> bool:
        try:
            d.find_element(by, value).click()
        except (StaleElementReferenceException, NoSuchElementException):
            return False
        return True

    wait(driver, attempt)


def cells(driver, row_selector: str) -> list[dict[str, str]]:
    return driver.execute_script(
        """return [...document.querySelectorAll(arguments[0])].map((tr) => Object.fromEntries(
             [...tr.querySelectorAll('td[data-col]')].map((td) => [td.dataset.col, td.innerText])
           ).valueOf() && Object.assign({_id: tr.dataset.trial || tr.dataset.exp},
             Object.fromEntries([...tr.querySelectorAll('td[data-col]')]
               .map((td) => [td.dataset.col, td.innerText]))))""",
        row_selector,
    )


def last_results(experiment: str) -> dict[str, dict]:
    out = {}
    for name in os.listdir(experiment):
        path = os.path.join(experiment, name, "result.json")
        if os.path.exists(path):
            with open(path) as f:
                lines = [json.loads(line) for line in f if line.strip()]
            out[lines[-1]["trial_id"]] = {**lines[-1], "history": lines}
    return out


def test_experiments_page(server, browser, project):
    browser.get(server + "/")
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "tr[data-exp]")) == 3)
    rows = {r["_id"]: r for r in cells(browser, "tr[data-exp]")}
    for name in ("asha", "errors", "pbt"):
        assert rows[name]["total"] == str(len(last_results(os.path.join(project, name))))
    assert rows["errors"]["error"] == "2"
    screenshot(browser, "experiments")


def test_experiment_page_table_and_curves(server, browser, project):
    experiment = os.path.join(project, "errors")
    files = last_results(experiment)
    browser.get(server + "/experiment?exp=errors")
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#trials tr[data-trial]")) == 5)
    rows = {r["_id"]: r for r in cells(browser, "#trials tr[data-trial]")}
    assert set(rows) == set(files)
    for trial_id, result in files.items():
        assert float(rows[trial_id]["metric"]) == pytest.approx(result["loss"], rel=1e-5)
        assert rows[trial_id]["iterations"] == str(result["training_iteration"])
        expected = "ERROR" if result["config"]["x"] > 0.8 else "TERMINATED"
        assert rows[trial_id]["status"] == expected
    # sorted by the metric (min first): the best trial is the first row
    first = browser.find_element(By.CSS_SELECTOR, "#trials tr[data-trial]").get_attribute(
        "data-trial"
    )
    assert first == min(files.values(), key=lambda r: r["loss"])["trial_id"]
    # select one trial: the curves chart shows its results only
    chosen = sorted(files)[2]
    click(browser, By.CSS_SELECTOR, f'tr[data-trial="{chosen}"] input')
    traces = wait(
        browser,
        lambda d: d.execute_script(
            "const c = document.getElementById('curves');"
            "return c.data && c.data.length === 1 && c.data[0].name === arguments[0] "
            "&& c.querySelectorAll('.scatterlayer .point').length ? "
            "c.data.map((t) => [t.name, t.y]) : null",
            chosen,
        ),
    )
    assert traces[0][1] == pytest.approx([r["loss"] for r in files[chosen]["history"]])
    # the other charts are drawn
    wait(browser, lambda d: d.execute_script(
        "return ['history', 'parallel'].every((id) => document.getElementById(id).data)"
    ))  # fmt: skip
    screenshot(browser, "experiment")
    # filtering on the server
    box = browser.find_element(By.ID, "filter")
    box.send_keys("status == ERROR\n")
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#trials tr[data-trial]")) == 2)


def test_scheduler_views_on_the_experiment_page(server, browser, project):
    """ASHA's rungs (where trials stopped) and PBT's exploits, drawn on the page."""
    files = last_results(os.path.join(project, "asha"))
    browser.get(server + "/experiment?exp=asha")
    bars = wait(
        browser,
        lambda d: d.execute_script(
            "const c = document.getElementById('stops');"
            "return c && c.data && c.querySelectorAll('.barlayer .point').length ? "
            "c.data.map((t) => [t.name, t.x, t.y]) : null"
        ),
    )
    stopped: dict[tuple[str, int], int] = {}
    for result in files.values():
        key = ("TERMINATED", result["training_iteration"])
        stopped[key] = stopped.get(key, 0) + 1
    drawn = {(name, x): y for name, xs, ys in bars for x, y in zip(xs, ys)}
    assert drawn == stopped and len({x for _, x in stopped}) > 1  # trials stopped at rungs
    assert "PBT" not in browser.find_element(By.ID, "scheduler").text
    assert not browser.find_elements(By.ID, "pbt")  # no PBT log: no PBT chart

    with open(os.path.join(project, "pbt", "pbt_global.txt")) as f:
        exploits = [line for line in f if line.strip()]
    browser.get(server + "/experiment?exp=pbt")
    arrows = wait(
        browser,
        lambda d: d.execute_script(
            "const c = document.getElementById('pbt');"
            "return c && c.layout && c.querySelectorAll('.annotation').length"
        ),
    )
    assert arrows == len(exploits) > 0
    assert "PBT's exploits" in browser.find_element(By.ID, "scheduler").text
    screenshot(browser, "scheduler-pbt")

    # a trial's page lists the exploits it took part in, with links to the other trial
    trial_ids = sorted(last_results(os.path.join(project, "pbt")))
    target = trial_ids[int(json.loads(exploits[0])[0].split("_")[0])]
    took = sum(trial_ids[int(json.loads(line)[0].split("_")[0])] == target for line in exploits)
    browser.get(f"{server}/trial?exp=pbt&id={target}")
    rows = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#pbt-history tr.took"))
    assert len(rows) == took and "taken from" in rows[0].text


def test_trial_page(server, browser, project):
    files = last_results(os.path.join(project, "errors"))
    failed = next(t for t, r in files.items() if r["config"]["x"] == 0.9)
    browser.get(server + "/experiment?exp=errors")
    click(browser, By.LINK_TEXT, failed)
    wait(browser, lambda d: d.find_elements(By.ID, "error"))
    assert "trial" in browser.current_url and failed in browser.current_url
    assert "ValueError: x=0.9 is too large" in browser.find_element(By.ID, "error").text
    assert "training with x=0.9" in browser.find_element(By.ID, "stdout").text
    assert "0.9" in browser.find_element(By.ID, "config").text
    points = wait(
        browser,
        lambda d: d.execute_script(
            "const c = document.getElementById('trial-curve');"
            "return c.data && c.querySelectorAll('.scatterlayer .point').length"
        ),
    )
    assert points == len(files[failed]["history"])
    rows = browser.find_elements(By.CSS_SELECTOR, "#metrics tr")
    assert len(rows) == 1 + len(files[failed]["history"])
    screenshot(browser, "trial")


def test_live_experiment_updates_without_reload(live, browser):
    process, base = start_server(os.path.dirname(live))
    try:
        browser.get(base + "/experiment?exp=live")
        wait(
            browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#trials tr[data-trial]")) == 2
        )

        def shown() -> int:
            rows = cells(browser, "#trials tr[data-trial]")
            return sum(int(r["iterations"] or 0) for r in rows)

        browser.execute_script("window.__marker = 'same page'")
        before, on_disk = shown(), iterations_of(live)
        assert all(r["status"] == "RUNNING" for r in cells(browser, "#trials tr[data-trial]"))
        start = time.monotonic()
        wait(browser, lambda d: shown() > max(before, on_disk), timeout=45)  # (loaded CI)
        print(f"table updated {time.monotonic() - start:.1f} s after")
        assert browser.execute_script("return window.__marker") == "same page"  # no reload
        screenshot(browser, "live")
    finally:
        stop(process)


def test_an_experiment_in_s3(s3_root, browser):
    """``fasttune dashboard s3://...`` (moto's S3 server; a real run wrote the bucket)."""
    import s3fs

    store = s3fs.S3FileSystem(skip_instance_cache=True)  # AWS_ENDPOINT_URL: the test server
    files = {}
    for path in store.glob(s3_root[len("s3://") :] + "/errors/*/result.json"):
        lines = [json.loads(line) for line in store.cat_file(path).decode().splitlines()]
        files[lines[-1]["trial_id"]] = lines
    process, base = start_server(s3_root)
    try:
        browser.get(base + "/experiment?exp=errors")
        row = "#trials tr[data-trial]"
        wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, row)) == 3)
        rows = {r["_id"]: r for r in cells(browser, row)}
        assert {t: r["iterations"] for t, r in rows.items()} == {
            t: str(h[-1]["training_iteration"]) for t, h in files.items()
        }
        failed = next(t for t, h in files.items() if h[-1]["config"]["x"] == 0.9)
        assert rows[failed]["status"] == "ERROR"
        click(browser, By.LINK_TEXT, failed)
        wait(browser, lambda d: d.find_elements(By.ID, "error"))
        assert "ValueError: x=0.9 is too large" in browser.find_element(By.ID, "error").text
        assert "training with x=0.9" in browser.find_element(By.ID, "stdout").text
        screenshot(browser, "s3-trial")
    finally:
        stop(process)


def test_token_in_the_browser(project, browser):
    process, base = start_server(project, "--host", "127.0.0.1", "--token", "browser-token-1")
    try:
        browser.get(base + "/")
        assert "401" in browser.find_element(By.TAG_NAME, "body").text
        browser.get(base + "/?token=browser-token-1")
        wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "tr[data-exp]")) == 3)
        browser.get(base + "/experiment?exp=asha")  # the cookie carries the token
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#trials tr[data-trial]"))
    finally:
        stop(process)
