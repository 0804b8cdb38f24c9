# SPDX-License-Identifier: MIT
"""src/'s folders are its layers (SPEC LY4): contrib/layers-check over this build's objects finds
no cycle between folders and no llhttp header in the event loop's folder; and it does find them
in a small tree made to have them. The host's struct is opaque outside src/core/ (D240): no file
there includes core/host-private.h, core/host.h declares the struct without a body, and with
every header the files outside core/ include the struct is incomplete; a copy of the tree made
to show it is caught. No server is started."""

import glob
import os
import re
import shutil
import subprocess
import tempfile

from m0test import REPO, build_dir, check, eq

# Every test here reads the tree's layout, the same whatever the sanitizer: the plain variant only (run.py, D235).
ONCE = True

CHECK = os.path.join(REPO, "contrib", "layers-check")


def _run(*args):
    r = subprocess.run([CHECK, *args], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def test_LY4_the_built_folders_have_no_cycle_and_the_loop_no_llhttp_header():
    rc, out = _run(build_dir())
    eq(rc, 0, "layers-check's exit status\n" + out)
    check(out.rstrip().endswith(": fine"), out)
    check("evloop -> http1" not in out, "the event loop calls into http1/\n" + out)


def _tree(root, files):
    """Sources under root/src/FOLDER/NAME.c, each compiled to the object layers-check reads."""
    for rel, text in files.items():
        os.makedirs(os.path.join(root, "src", os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(root, "src", rel), "w", encoding="utf-8") as f:
            f.write(text)
    for rel in files:
        folder, name = os.path.split(rel)
        src = os.path.join(root, "src", folder)
        if not name.endswith(".c"):
            continue
        obj = os.path.join(root, "build", "src", folder, "libm0_core_la-" + name[:-2] + ".o")
        os.makedirs(os.path.dirname(obj), exist_ok=True)
        subprocess.run(["cc", "-c", "-w", "-I" + os.path.join(root, "src", "http1"),
                        os.path.join(src, name), "-o", obj], check=True)


def test_LY4_a_cycle_and_an_llhttp_header_in_the_loop_are_found():
    with tempfile.TemporaryDirectory() as d:
        files = {f"f{i}/pad.c": f"int pad{i};\n" for i in range(4)}
        files.update({
            "evloop/loop.c": '#include "conn.h"\nint epoll_wait(void);\n'
                             "int m0__loop_run_once(void) { return epoll_wait(); }\n",
            "http1/conn.h": "int m0__conn_x(void);\n",
            "http1/conn.c": "int llhttp_execute(void); int m0__bus_y(void);\n"
                            "int m0__conn_x(void) { return llhttp_execute() + m0__bus_y(); }\n",
            "bus/bus.c": "int m0__conn_x(void);\nint m0__bus_y(void) { return m0__conn_x(); }\n",
        })
        _tree(d, files)
        rc, out = _run(os.path.join(d, "build"), os.path.join(d, "src"))
        eq(rc, 1, "layers-check's exit status\n" + out)
        check("a cycle between folders bus http1" in out, out)
        check("http1 -> bus: m0__bus_y" in out and "bus -> http1: m0__conn_x" in out, out)
        check("src/evloop/loop.c includes conn.h, a header of http1/" in out, out)
        check("7 folders, 0 .c at the top, 7 objects: 2 problem(s)" in out, out)


def test_LY4_the_host_struct_is_opaque_outside_core():
    src = os.path.join(REPO, "src")
    core = os.path.join(src, "core")
    with open(os.path.join(core, "host.h"), encoding="utf-8") as f:
        host_h = f.read()
    check(re.search(r"^struct m0_host;$", host_h, re.M), "core/host.h declares struct m0_host")
    check(not re.search(r"struct\s+m0_host\s*\{", host_h), "core/host.h has no struct body")
    seen = []
    for p in glob.glob(os.path.join(src, "**", "*.[ch]"), recursive=True):
        if os.path.commonpath([p, core]) == core:
            continue
        with open(p, encoding="utf-8") as f:
            if re.search(r'^\s*#\s*include\s+"(?:[^"]*/)?host-private\.h"', f.read(), re.M):
                seen.append(os.path.relpath(p, REPO))
    eq(seen, [], "files outside src/core/ including host-private.h")
    rc, out = _run(build_dir())
    eq(rc, 0, "layers-check's exit status\n" + out)
    check(re.search(r"^layers-check: struct m0_host incomplete outside core/ \(\d+ headers\)$", out,
                    re.M), out)


def test_LY4_the_host_struct_seen_outside_core_is_found():
    with tempfile.TemporaryDirectory() as d:
        for part in ("src", "include"):
            shutil.copytree(os.path.join(REPO, part), os.path.join(d, part))
        accept = os.path.join(d, "src", "http1", "accept.c")
        with open(accept, encoding="utf-8") as f:
            text = f.read()
        with open(accept, "w", encoding="utf-8") as f:
            f.write(text.replace('#include "config.h"\n', '#include "config.h"\n#include "host-private.h"\n', 1))
        with open(os.path.join(d, "src", "core", "host.h"), "a", encoding="utf-8") as f:
            f.write("struct m0_host {\n        int nloops;\n};\n")
        rc, out = _run(build_dir(), os.path.join(d, "src"))
        eq(rc, 1, "layers-check's exit status\n" + out)
        check("layers-check: src/http1/accept.c includes host-private.h, the host's layout "
              "(core/'s alone)" in out, out)
        check("layers-check: src/core/host.h defines struct m0_host (its layout is "
              "core/host-private.h's)" in out, out)
        check("layers-check: struct m0_host is complete with the headers the files outside "
              "core/ include: its layout is seen outside core/" in out, out)
        check(out.rstrip().endswith(": 3 problem(s)"), out)
