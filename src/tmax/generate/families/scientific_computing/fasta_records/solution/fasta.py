{{ oracle }}
import sys

LEVEL, MODE = {{ level }}, "{{ mode }}"

if __name__ == "__main__":
    with open(sys.argv[1], encoding="latin-1", newline="") as handle:
        text = handle.read()
    if MODE == "check":
        problem = fasta_problem(text, LEVEL)
        if problem:
            print(problem, file=sys.stderr)
            sys.exit(1)
    else:
        for rid, seq in fasta_records(text):
            print(record_row(rid, seq, LEVEL))
