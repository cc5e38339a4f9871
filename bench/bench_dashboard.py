"""The dashboard on a large experiment: page load times, cold and warm.

Makes an experiment of N trials (default 10,000; 3 results each) unless a folder is
given, serves it with ``fasttune dashboard`` and times, over HTTP, the experiment
page's requests, and in headless Chromium (when selenium and /usr/bin/chromium are
there) the time from navigation to the trials table drawn.

Run: ``.venv/bin/python bench/bench_dashboard.py [--trials 10000] [--path EXPERIMENT]``
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import fasttune as tune


def tiny(config):
    for i in range(3):
        tune.report({"loss": config["x"] / (i + 1), "acc": 1 - config["x"]})


def make(n: int) -> str:
    root = tempfile.mkdtemp(prefix="dash_bench_")
    start = time.perf_counter()
    tune.Tuner(
        tiny,
        param_space={"x": tune.uniform(0, 1), "y": tune.choice(["a", "b", "c"])},
        tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=n),
        run_config=tune.RunConfig(storage_path=root, name="big", verbose=0),
    ).fit()
    print(f"made {n} trials in {time.perf_counter() - start:.1f} s: {root}/big")
    return os.path.join(root, "big")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url) as response:
        response.read()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--path", help="an existing experiment folder")
    args = parser.parse_args()
    experiment = args.path or make(args.trials)
    root, name = os.path.split(experiment.rstrip("/"))
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "fasttune", "dashboard", root, "--port", str(port)],
        stdout=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                get(base + "/")
                break
            except OSError:
                time.sleep(0.1)
        api = f"{base}/api/trials?exp={name}&limit=50&sort=metric"
        cold = get(f"{base}/api/experiment?exp={name}") + get(api)
        warm = get(f"{base}/experiment?exp={name}") + get(f"{base}/api/experiment?exp={name}")
        warm += get(api)
        print(f"HTTP: experiment page data, cold (first read of the files): {cold:.2f} s")
        print(f"HTTP: experiment page data, warm: {warm:.3f} s")
        sorted_page = get(api + "&desc=1&offset=5000&q=y%20%3D%3D%20b".replace("y", "config/y"))
        print(f"HTTP: a sorted, filtered page 100 of 10,000: {sorted_page:.3f} s")
        browser(base, name)
    finally:
        server.terminate()
        server.wait()


def browser(base: str, name: str) -> None:
    if not os.path.exists("/usr/bin/chromium"):
        print("no /usr/bin/chromium: browser timing skipped")
        return
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    options.page_load_strategy = "none"  # time the table, not the charts after it
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    service = webdriver.ChromeService(executable_path="/usr/bin/chromedriver")
    driver = webdriver.Chrome(options=options, service=service)
    try:
        for label in ("browser, first visit", "browser, reload"):
            driver.get(f"{base}/experiment?exp={name}")
            WebDriverWait(driver, 30).until(
                lambda d: len(d.find_elements(By.CSS_SELECTOR, "#trials tr[data-trial]")) == 50
            )
            # from the start of the navigation to the table drawn, measured by the page
            drawn = driver.execute_script(
                "return performance.getEntriesByName('fasttune:table')[0].startTime"
            )
            print(f"{label}: table of 50 of the trials drawn {drawn / 1000:.2f} s "
                  "after navigation started")  # fmt: skip
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
