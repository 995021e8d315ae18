"""Writes the paramd wheel (python/BUILD's `wheel`): the package's files,
its native module among them, and the .dist-info that pip reads
(METADATA, WHEEL, RECORD with each file's sha256), as PEP 427 lays a
wheel out. Standard library only.

    make_wheel.py --out DIR/paramd-VERSION-TAG.whl --version VERSION \
        --tag TAG DEST=SRC...

DEST is the file's path inside the wheel (e.g. paramd/_native.so), SRC
where it is now.
"""

import argparse
import base64
import hashlib
import zipfile

METADATA = """Metadata-Version: 2.1
Name: paramd
Version: {version}
Summary: Train models through paramd parameter servers (paramd.torch: PyTorch)
Requires-Python: >={python}
Description-Content-Type: text/markdown

paramd.torch trains any torch.nn.Module through paramd's parameter
servers: see docs/pytorch.md of the paramd sources. PyTorch itself is not
a dependency of the wheel: install it as your system does (Debian's
python3-torch, seen from a venv made with --system-site-packages).
"""

WHEEL = """Wheel-Version: 1.0
Generator: paramd make_wheel.py
Root-Is-Purelib: false
Tag: {tag}
"""


def digest(data):
    raw = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--tag", required=True)
    parser.add_argument("files", nargs="+", help="DEST=SRC")
    args = parser.parse_args()
    interpreter = args.tag.split("-")[0]
    python = (f"{interpreter[2]}.{interpreter[3:]}"
              if interpreter.startswith("cp") else "3")
    info = f"paramd-{args.version}.dist-info"
    entries = []
    for pair in args.files:
        dest, src = pair.split("=", 1)
        with open(src, "rb") as f:
            entries.append((dest, f.read()))
    entries.append((f"{info}/METADATA", METADATA.format(
        version=args.version, python=python).encode()))
    entries.append((f"{info}/WHEEL", WHEEL.format(tag=args.tag).encode()))
    record = "".join(f"{dest},{digest(data)},{len(data)}\n"
                     for dest, data in entries) + f"{info}/RECORD,,\n"
    entries.append((f"{info}/RECORD", record.encode()))
    with zipfile.ZipFile(args.out, "w", zipfile.ZIP_DEFLATED) as wheel:
        for dest, data in entries:
            # Fixed times and modes: the same inputs make the same wheel.
            entry = zipfile.ZipInfo(dest, date_time=(1980, 1, 1, 0, 0, 0))
            entry.external_attr = (0o755 if dest.endswith(".so")
                                   else 0o644) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(entry, data)


if __name__ == "__main__":
    main()
