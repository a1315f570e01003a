"""Gives the Python distributions Debian's packages installed a RECORD, as pip writes one, so that
pip can upgrade or remove them as it would its own (Docker Hub's python images have no others)."""
import pathlib
import subprocess

SITE = pathlib.Path("/usr/lib/python3/dist-packages")


def owned(info: pathlib.Path) -> list[str]:
    found = subprocess.run(["dpkg", "-S", str(info)], capture_output=True, text=True).stdout
    package = found.split(":", 1)[0].strip()
    if not package:
        return []
    listed = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True).stdout.split("\n")
    return [p for p in listed if p.startswith(f"{SITE}/") and pathlib.Path(p).is_file()]


for info in sorted(SITE.glob("*.dist-info")):
    if (info / "RECORD").exists():
        continue
    tops = {info.name}
    top_level = info / "top_level.txt"
    if top_level.exists():
        tops |= {t.strip() for t in top_level.read_text().split() if t.strip()}
    else:
        tops.add(info.name.split("-", 1)[0])
    files = [
        p for p in owned(info)
        if pathlib.Path(p).relative_to(SITE).parts[0].removesuffix(".py") in tops
    ]
    rel = sorted({str(pathlib.Path(p).relative_to(SITE)) for p in files} | {f"{info.name}/RECORD"})
    (info / "RECORD").write_text("".join(f"{r},,\n" for r in rel))
    (info / "INSTALLER").write_text("pip\n")
