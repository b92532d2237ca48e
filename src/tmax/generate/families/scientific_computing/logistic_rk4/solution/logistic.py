{{ oracle }}
import sys

MODE = "{{ mode }}"

if __name__ == "__main__":
    with open(sys.argv[1]) as handle:
        print(solve_cases(handle.read(), MODE))
