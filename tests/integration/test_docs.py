# SPDX-License-Identifier: MIT
"""The documentation agrees with the code: every function include/m0.h exports is in m0(3)'s
SYNOPSIS with the same signature, has an entry under FUNCTIONS, and that entry names exactly
the errors the header's contract names (the -EXXX values). No server is started."""

import os
import re

from m0test import REPO, check, eq

HEADER = os.path.join(REPO, "include", "m0.h")
PAGE = os.path.join(REPO, "doc", "m0.3")


def _norm(sig):
    """A C declaration with its parameter names, spacing and M0_PRINTF() dropped."""
    sig = re.sub(r"M0_PRINTF\([^)]*\)", "", sig)
    sig = re.sub(r"\s+", " ", sig).strip().rstrip(";").strip()
    sig = re.sub(r"\s*([(),*])\s*", r"\1", sig)
    return sig


def header_exports():
    """{name: (normalized declaration, {"-EINVAL", ...})} of every M0_EXPORT function."""
    text = open(HEADER, encoding="utf-8").read()
    out = {}
    rx = re.compile(r"(/\*\*(?:(?!\*/).)*\*/)?\s*M0_EXPORT\s+([^;]*?\b(m0_\w+)\s*\([^;]*\)[^;]*);", re.S)
    for m in rx.finditer(text):
        comment, decl, name = m.group(1) or "", m.group(2), m.group(3)
        out[name] = (_norm(decl), set(re.findall(r"-E[A-Z]+\b", comment)))
    return out


def _unroff(line):
    """One SYNOPSIS line of troff (.B/.BI with quoted runs) as plain text."""
    line = re.sub(r"^\.(BI|B|BR|IR|I)\s+", "", line)
    parts = re.findall(r'"([^"]*)"|(\S+)', line)
    return "".join(a if a else b for a, b in parts).replace("\\-", "-")


def page_synopsis():
    """{name: normalized declaration} from m0(3)'s SYNOPSIS."""
    text = open(PAGE, encoding="utf-8").read()
    syn = text.split(".SH SYNOPSIS", 1)[1].split(".SH DESCRIPTION", 1)[0]
    decls, cur = {}, ""
    for line in syn.split("\n"):
        if not line.startswith((".BI", ".B ")) or "#include" in line:
            continue
        cur += " " + _unroff(line)
        if cur.rstrip().endswith(";"):
            m = re.search(r"\b(m0_\w+)\s*\(", cur)
            if m:
                decls[m.group(1)] = _norm(cur)
            cur = ""
    return decls


def page_entries():
    """[(names, {"-EINVAL", ...})] of each entry under FUNCTIONS: a .TP whose next line names
    one function or several (.BR a() ", " b()), and its text up to the next such .TP, .SS or
    .SH."""
    text = open(PAGE, encoding="utf-8").read()
    lines = text.split(".SH FUNCTIONS", 1)[1].split("\n")
    entries, cur = [], None
    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        starts = line == ".TP" and re.match(r"^\.(B|BR) m0_\w+\(\)", nxt)
        if starts or line.startswith((".SS", ".SH")):
            if cur:
                entries.append(cur)
            cur = None
            if line.startswith(".SH"):
                break
            if starts:
                cur = (re.findall(r"\b(m0_\w+)\(\)", nxt), set())
            continue
        if cur:
            cur[1].update(e.replace("\\-", "-") for e in re.findall(r"\\-E[A-Z]+\b", line))
    if cur:
        entries.append(cur)
    return entries


def _decl_without_names(decl):
    """Drop parameter names: 'int f(const char*name,size_t n)' -> 'int f(const char*,size_t)'."""
    m = re.match(r"^(.*?\()(.*)(\).*)$", decl)
    head, params, tail = m.group(1), m.group(2), m.group(3)
    kept = []
    for p in params.split(","):
        p = p.strip()
        if p in ("void", "...", ""):
            kept.append(p)
            continue
        p = re.sub(r"\[[^\]]*\]$", "[]", p)
        q = re.sub(r"(\w+)(\[\])?$", lambda mm: mm.group(2) or "", p)
        kept.append(q if q and not q.endswith(("const", "struct")) else p)
    return head + ",".join(kept) + tail


def test_docs_every_export_has_its_synopsis_line():
    exports = header_exports()
    check(len(exports) >= 20, f"only {len(exports)} exports found in m0.h: the parser is off")
    syn = page_synopsis()
    missing = sorted(set(exports) - set(syn))
    eq(missing, [], "exported functions m0(3)'s SYNOPSIS lacks")
    extra = sorted(set(syn) - set(exports))
    eq(extra, [], "functions in m0(3)'s SYNOPSIS that m0.h does not export")
    for name, (decl, _) in sorted(exports.items()):
        eq(_decl_without_names(syn[name]), _decl_without_names(decl), f"{name}'s signature in m0(3)")


def test_docs_every_export_has_an_entry_with_the_header_errors():
    exports = header_exports()
    entries = page_entries()
    documented = {n for names, _ in entries for n in names}
    eq(sorted(set(exports) - documented), [], "exported functions with no entry under FUNCTIONS")
    for names, errs in entries:
        want = set()
        for n in names:
            check(n in exports, f"m0(3) documents {n}(), which m0.h does not export")
            want |= exports[n][1]
        eq(sorted(errs), sorted(want), f"errors m0(3) names for {', '.join(names)} vs m0.h")


ARCH = os.path.join(REPO, "doc", "ARCHITECTURE.md")


def test_LY5_every_src_path_the_architecture_names_exists():
    """doc/ARCHITECTURE.md is true to the tree (LY5): each src/ path it names (a glob such as
    src/bus/pg/pgbus*.c matches at least one file), and each file its table of folders lists
    ("conn.c/h" is conn.c and conn.h) is there."""
    import glob

    text = open(ARCH, encoding="utf-8").read()
    paths = {p.rstrip(".,:;)") for p in re.findall(r"\bsrc/[\w./*-]+", text)}
    check(len(paths) >= 30, f"only {len(paths)} src/ paths named")
    missing = sorted(p for p in paths if not glob.glob(os.path.join(REPO, p)))
    eq(missing, [], "src/ paths doc/ARCHITECTURE.md names that do not exist")
    rows = re.findall(r"^\| (src/[\w/]+/) \| (.*) \|$", text, re.M)
    check(len(rows) >= 6, f"the table of folders has {len(rows)} rows")
    listed = set()
    for folder, cell in rows:
        for name in re.findall(r"([\w-]+)\.(c/h|c|h)\b", re.sub(r"\([^)]*\)", "", cell)):
            for ext in ("c", "h") if name[1] == "c/h" else (name[1],):
                listed.add(folder + name[0] + "." + ext)
    missing = sorted(p for p in listed if not os.path.exists(os.path.join(REPO, p)))
    eq(missing, [], "files doc/ARCHITECTURE.md's table lists that are not in their folder")
    on_disk = {os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "src", "**", "*.[ch]"),
                                                            recursive=True)}
    eq(sorted(on_disk - listed), [], "files under src/ the table of folders leaves out")
