{{ oracle }}
import sys

if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as handle:
        manifest = handle.read()
    sys.stdout.write(audit_text(audit(manifest, sys.argv[2:])[0]))
