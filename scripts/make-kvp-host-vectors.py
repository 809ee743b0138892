#!/usr/bin/env python3
"""Writes testdata/kvp-host/*.bin: small KVP pools for what the Hyper-V host keeps of a pool.

The host keeps one record per key (azure-init PR #313), reads each record on its own, and its
kernel conversion rejects a value that is not UTF-8 on its own (azure-init doc/kvp.md). Each
pool here is one case; testdata/kvp-host/README.md lists the findings each must give.

The records are built here byte by byte (512-byte key + 2048-byte value, NUL padded), not by
the oracle's encoder, so the vectors do not depend on the code they test. Deterministic: run
it again and `git diff` shows nothing.

    python3 scripts/make-kvp-host-vectors.py
"""

import pathlib

KEY_SIZE, VALUE_SIZE = 512, 2048
HOST_VALUE_MAX = 1022
VM = "0e5a1c6d-93a2-4e0b-8a8c-3c4d5e6f7a8b"
OUT = pathlib.Path(__file__).resolve().parent.parent / "testdata" / "kvp-host"


def record(key: bytes, value: bytes) -> bytes:
    assert 0 < len(key) < KEY_SIZE and len(value) < VALUE_SIZE
    return key.ljust(KEY_SIZE, b"\0") + value.ljust(VALUE_SIZE, b"\0")


def pool(records) -> bytes:
    return b"".join(record(k.encode() if isinstance(k, str) else k, v) for k, v in records)


def azure_init_event(level: str, name: str, uuid: str) -> str:
    return f"azure-init-0.1.1|{VM}|{level}|{name}|{uuid}"


def chunks_under_one_key(key: str, value: bytes):
    """azure-init main (libazureinit/src/kvp.rs): 1022-byte cuts, inside characters too."""
    return [(key, value[i : i + HOST_VALUE_MAX]) for i in range(0, len(value), HOST_VALUE_MAX)]


def chunks_under_suffix_keys(base: str, value: bytes, cut_inside: bool):
    """PR #313's scheme: `<base>|<index>`; it cuts on character boundaries unless told not to."""
    out, rest, i = [], value, 0
    while rest:
        end = min(len(rest), HOST_VALUE_MAX)
        while not cut_inside and end < len(rest) and (rest[end] & 0xC0) == 0x80:
            end -= 1
        out.append((f"{base}|{i}", rest[:end]))
        rest, i = rest[end:], i + 1
    return out


# The long failure of the azure-init main run (notes: x.user.kvp-split, 1423 bytes).
LONG_REPORT = (
    "result=error|reason=user not found|agent=Azure-Init/0.1.1|user=x"
    + "\u20ac" * 400
    + f"|pps_type=None|vm_id={VM}|timestamp=2026-12-01T23:15:00.169000000+00:00"
    + "|documentation_url=https://aka.ms/linuxprovisioningerror"
).encode()
ERROR_REPORT = (
    "result=error|reason=failed to provision user|agent=Azure-Init/0.1.1|error=useradd exited with 9"
    f"|pps_type=None|vm_id={VM}|timestamp=2026-12-01T23:15:00.169000000+00:00"
    "|documentation_url=https://aka.ms/linuxprovisioningerror"
).encode()
SUCCESS_REPORT = (
    f"result=success|agent=Azure-Init/0.1.1|pps_type=None|vm_id={VM}"
    "|timestamp=2026-12-01T23:16:00.000000000+00:00"
).encode()
DIAG_BASE = (
    f"DIAG|azure-init/0.1.1|{VM}|event|dmesg|8f3e9c4a-1b2c-4d5e-9f01-234567890abc"
    "|2026-08-31T12:34:56.789Z|none||"
)
# 3111 bytes of multi-byte text; byte 1022 falls inside a 本.
LOG = ("dmesg log: " + "kernel: naïve 日本 € line\n" * 100).encode()

CASES = {
    # azure-init main's long report: two records under PROVISIONING_REPORT, cut inside a €.
    "azure-init-main-split-report.bin": [
        (azure_init_event("INFO", "provision:user", "1aabfdc2-575d-4414-93ff-1f02bfc11d5f"), b"Provisioning user"),
        *chunks_under_one_key("PROVISIONING_REPORT", LONG_REPORT),
    ],
    # Two whole reports under the one key: a failure, then a success (two runs, appended).
    "two-reports-one-key.bin": [
        ("PROVISIONING_REPORT", ERROR_REPORT),
        (azure_init_event("INFO", "health:report", "2bbfdc2a-575d-4414-93ff-1f02bfc11d5f"), b"Initiating health report"),
        ("PROVISIONING_REPORT", SUCCESS_REPORT),
    ],
    # A diagnostic event of 1500 ASCII bytes, azure-init main style: two records, one key.
    "duplicate-event-key.bin": [
        *chunks_under_one_key(azure_init_event("DEBUG", "imds:query", "3ccfdc2a-575d-4414-93ff-1f02bfc11d5f"), b"d" * 1500),
        ("PROVISIONING_REPORT", SUCCESS_REPORT),
    ],
    # PR #313: unique `|<index>` keys, cut on character boundaries, written out of order.
    "pr313-suffix-chunks.bin": [
        *reversed(chunks_under_suffix_keys(DIAG_BASE, LOG, cut_inside=False)),
        ("PROVISIONING_REPORT", SUCCESS_REPORT),
    ],
    # Unique keys, but cut inside characters: each record alone is invalid UTF-8.
    "suffix-chunks-split-character.bin": [
        *chunks_under_suffix_keys(DIAG_BASE, LOG, cut_inside=True),
    ],
    # Unique keys with chunk 1 missing (lost or never written).
    "suffix-chunks-gap.bin": [
        c for c in chunks_under_suffix_keys(DIAG_BASE, LOG, cut_inside=False) if not c[0].endswith("|1")
    ],
}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, records in CASES.items():
        (OUT / name).write_bytes(pool(records))
        print(f"{name}: {len(records)} records")


if __name__ == "__main__":
    main()
