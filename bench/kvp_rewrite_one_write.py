"""The reference of the bench's kill loop: the pool rewrite provision-report did before issue 13.

Read the whole pool, put the new record in place of the first record with the key, drop the
other copies, write everything back with one write at offset 0, truncate. Under flock and a
whole-file fcntl write lock, as the reporter took them.

    python3 kvp_rewrite_one_write.py POOL KEY VALUE
"""
import fcntl
import os
import sys

RECORD = 2560


def main():
    path, key, value = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
    new = key.ljust(512, b"\0") + value.ljust(2048, b"\0")
    fd = os.open(path, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0)
    out, placed = [], False
    for at in range(0, size - size % RECORD, RECORD):
        slot = data[at:at + RECORD]
        if slot[:512].split(b"\0", 1)[0] == key:
            if not placed:
                out.append(new)
                placed = True
        else:
            out.append(slot)
    if not placed:
        out.append(new)
    rewritten = b"".join(out)
    written = 0
    while written < len(rewritten):
        written += os.pwrite(fd, rewritten[written:], written)
    os.ftruncate(fd, len(rewritten))


main()
