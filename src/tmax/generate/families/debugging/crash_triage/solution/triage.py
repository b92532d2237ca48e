import os
import signal
import subprocess
import sys


def run(path):
    with open(path, "rb") as handle:
        done = subprocess.run(["{{ binary }}"], stdin=handle, capture_output=True)
    lines = done.stdout.decode().count("\n")
    if done.returncode < 0:
        return "signal:" + signal.Signals(-done.returncode).name, lines + 1
    if done.returncode > 0:
        return f"exit:{done.returncode}", lines + 1
    return "ok", 0


def main():
    folder = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else "status"
    print("file,status" if mode == "status" else "file,line")
    for name in sorted(os.listdir(folder)):
        status, line = run(os.path.join(folder, name))
        if mode == "status":
            print(f"{name},{status}")
        elif status != "ok":
            print(f"{name},{line}")


main()
