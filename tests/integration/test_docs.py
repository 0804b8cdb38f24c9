# SPDX-License-Identifier: MIT
"""The documentation agrees with the code: every function include/m0.h exports is in m0(3)'s
SYNOPSIS with the same signature, has an entry under FUNCTIONS, and that entry names exactly
the errors the header's contract names (the -EXXX values). No server is started."""

import os
import re

from m0test import REPO, check, eq

# Every test here reads the documents, the same whatever the build: the plain variant only (run.py, D235).
ONCE = True

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


# ---- requirement ids (SPEC LY5) ----

REQUIREMENTS = os.path.join(REPO, "doc", "REQUIREMENTS.md")
# A requirement id as the tree cites it: one or two capitals and a number from 1 ("H3", "LY5"),
# alone or inside a test's name ("test_G3_outage"): not after a letter, a digit, '%' or '-' (so
# not "%A9", "grep -A30") and not before a letter or a digit (so not "H2O", "M0_"...). D is left
# out: "D57" numbers an entry of doc/DECISIONS.md (the doctor's D1 is listed all the same).
ID_LETTERS = "ABCGHJKLMNOPQRSTWXY"  # the areas of doc/REQUIREMENTS.md, less D
CITED_ID = re.compile(rf"(?<![A-Za-z0-9%-])((?:LY|TL|HT|WS|SF|AP|[{ID_LETTERS}])[1-9][0-9]?)"
                      r"(?![A-Za-z0-9])")
CITING_TREES = ("src", "include", "tests", "doc")
NOT_CITING = ("tests/fuzz/corpus",)  # inputs of the fuzz harnesses: bytes, not prose


def _cited_ids():
    """{id: first "path:line" that cites it} over the text files of CITING_TREES."""
    out = {}
    for tree in CITING_TREES:
        for top, dirs, files in os.walk(os.path.join(REPO, tree)):
            dirs.sort()
            for fn in sorted(files):
                path = os.path.join(top, fn)
                rel = os.path.relpath(path, REPO)
                if rel.startswith(NOT_CITING):
                    continue
                try:
                    with open(path, encoding="utf-8") as f:
                        lines = f.readlines()
                except (UnicodeDecodeError, OSError):
                    continue  # not text: an object file, an image
                for n, line in enumerate(lines, 1):
                    for m in CITED_ID.finditer(line):
                        out.setdefault(m.group(1), f"{rel}:{n}")
    return out


def _requirement_rows():
    """[(id, proof)] of the page's tables: `| id | behaviour | `proof` |`."""
    rows = []
    for line in open(REQUIREMENTS, encoding="utf-8"):
        m = re.match(r"^\| ([A-Z]{1,2}[0-9]+) \| (.+) \| `([^`]+)` \|$", line.rstrip("\n"))
        if m:
            rows.append((m.group(1), m.group(3)))
        elif re.match(r"^\| [A-Z]{1,2}[0-9]+ \|", line):
            raise AssertionError(f"a row of {REQUIREMENTS} without one `proof`: {line.strip()}")
    return rows


def _proof_exists(proof):
    """A `path::function` (a Python test), `path:name` (a Check START_TEST) or a path."""
    path, sep, name = proof.partition("::")
    if not sep:
        path, sep, name = proof.partition(":")
    full = os.path.join(REPO, path)
    if not os.path.isfile(full):
        return False
    if not sep:
        return True
    text = open(full, encoding="utf-8").read()
    pattern = (rf"^def {re.escape(name)}\(" if proof.count("::") else
               rf"^START_TEST\({re.escape(name)}\)")
    return re.search(pattern, text, re.M) is not None


def test_LY5_docs_every_cited_id_resolves():
    """Every requirement id cited in src/, include/, tests/ and doc/ has its line in
    doc/REQUIREMENTS.md, once, and the test each line names exists (SPEC LY5)."""
    rows = _requirement_rows()
    ids = [i for i, _ in rows]
    eq(sorted(i for i in set(ids) if ids.count(i) > 1), [], "ids listed twice")
    check(len(ids) >= 80, f"{len(ids)} ids listed")
    cited = _cited_ids()
    missing = sorted(f"{i} ({where})" for i, where in cited.items() if i not in ids)
    eq(missing, [], "ids cited but not in doc/REQUIREMENTS.md")
    eq([f"{i}: {p}" for i, p in rows if not _proof_exists(p)], [],
       "tests named in doc/REQUIREMENTS.md that do not exist")


def test_LY5_cited_id_pattern():
    """What the id pattern takes for a citation, and what it leaves."""
    # Ids of no area ("H" 10, "P" 99) are built here, so that this file cites none.
    unknown = "H%d, P%d" % (10, 99)
    found = [m.group(1) for m in CITED_ID.finditer(
        "(H3) SPEC N5, LY6; test_G3_outage test_X1_L4_stop. D57 D1 M0_PORT H2O %C3%A9 "
        "grep -A30 X509 U32 V1 h2 " + unknown)]
    eq(found, ["H3", "N5", "LY6", "G3", "X1", "L4"] + unknown.split(", "), "ids found")


def test_LY5_architecture_names_files_that_exist():
    """Every C file doc/ARCHITECTURE.md names exists: a path as written (from the top or from
    src/), or a bare name found anywhere under src/, include/ or apps/ (so the page may name
    `loop.c`, `src/loop.c` or `src/loop/loop.c`, wherever the tree keeps it)."""
    text = open(os.path.join(REPO, "doc", "ARCHITECTURE.md"), encoding="utf-8").read()
    names = sorted(set(re.findall(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.[ch])\b", text)))
    check(len(names) >= 10, f"ARCHITECTURE.md names {len(names)} C files")
    basenames = set()
    for tree in ("src", "include", "apps"):
        for _, _, files in os.walk(os.path.join(REPO, tree)):
            basenames.update(files)
    gone = [n for n in names
            if not (os.path.isfile(os.path.join(REPO, n))
                    or os.path.isfile(os.path.join(REPO, "src", n))
                    or ("/" not in n and n in basenames))]
    eq(gone, [], "files doc/ARCHITECTURE.md names that are not in the tree")


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
