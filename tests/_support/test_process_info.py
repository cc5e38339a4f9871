import os

from fasttune._support import process_info


def test_pid_is_this_process_and_a_forked_childs_own():
    assert process_info.pid() == os.getpid()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: report what pid() says there
        os.write(write, str(process_info.pid()).encode())
        os._exit(0)
    os.close(write)
    said = int(os.read(read, 64))
    os.close(read)
    os.waitpid(child, 0)
    assert said == child
    assert process_info.pid() == os.getpid()
