import sys

# Legacy account-record checker. Known to let broken records through.
for line in sys.stdin:
    fields = line.rstrip("\n").split(":")
    ok = len(fields) >= 4
    if ok:
        name, uid, email, shell = fields[:4]
        ok = name[:1].isalpha() and uid.isdigit() and int(uid) >= 1000 and "@" in email
        ok = ok and shell.startswith("/")
    print("VALID" if ok else "INVALID")
