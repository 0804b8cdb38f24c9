# SPDX-License-Identifier: MIT
"""doc/tutorial.md cannot drift from the code (SPEC A7): each of its programs is built with the
page's own `cc … $(pkg-config …)` line against this build installed in a temporary root, with
no warning; each is started with the page's own command line (as systemd would, on a passed
socket) and every `$ curl` of its transcripts prints exactly what the page shows (step 5's
logins and sessions too, AP1, and step 6's rooms, built from apps/rooms.c, WS6); and every
excerpt of apps/todo.c and apps/rooms.c on the page is in that file as written.

The page's fences: ```c NAME (a program, written to NAME; several blocks of one NAME are
joined), ```c apps/todo.c or ```c apps/rooms.c (an excerpt), ```sh (`$ cc` lines build, `$ [VAR=value …] ./NAME
[args] &` starts), ```console NAME (commands run against NAME, each followed by its output)."""

import os
import re
import shlex
import subprocess
import tempfile

from m0test import REPO, Server, build_dir, check, eq

TUTORIAL = os.path.join(REPO, "doc", "tutorial.md")
FENCE = re.compile(r"^```(\w+)(?: (\S+))?\n(.*?)^```$", re.M | re.S)


def blocks():
    with open(TUTORIAL, encoding="utf-8") as f:
        return [(m.group(1), m.group(2), m.group(3)) for m in FENCE.finditer(f.read())]


def commands(text):
    """A block's `$ ` lines, each with the lines that follow it up to the next one."""
    out = []
    for line in text.splitlines():
        if line.startswith("$ "):
            out.append([line[2:], []])
        elif out:
            out[-1][1].append(line)
    return [(cmd, "".join(ln + "\n" for ln in lines)) for cmd, lines in out]


def test_A7_tutorial_excerpts_are_the_app():
    with open(os.path.join(REPO, "apps", "todo.c"), encoding="utf-8") as f:
        source = f.read()
    excerpts = [text for lang, name, text in blocks() if lang == "c" and name == "apps/todo.c"]
    check(len(excerpts) >= 4, f"{len(excerpts)} excerpts of apps/todo.c")
    for text in excerpts:
        check(text in source, f"not in apps/todo.c as the tutorial shows it:\n{text}")


def test_WS6_tutorial_excerpts_are_rooms():
    """Step 6's excerpts of apps/rooms.c are in apps/rooms.c as written (SPEC WS6); its build
    and transcript run in test_A7_tutorial_programs_build_and_answer."""
    with open(os.path.join(REPO, "apps", "rooms.c"), encoding="utf-8") as f:
        source = f.read()
    excerpts = [text for lang, name, text in blocks() if lang == "c" and name == "apps/rooms.c"]
    check(len(excerpts) >= 4, f"{len(excerpts)} excerpts of apps/rooms.c")
    for text in excerpts:
        check(text in source, f"not in apps/rooms.c as the tutorial shows it:\n{text}")


def install(root):
    """`make install DESTDIR=root` of the build under test; the pkg-config and loader paths that
    find it there."""
    out = subprocess.run(["make", "-s", "install", f"DESTDIR={root}"], cwd=build_dir(),
                         capture_output=True, text=True, timeout=300)
    eq(out.returncode, 0, f"make install: {out.stderr[-500:]}")
    pcs = [os.path.join(d, "m0.pc") for d, _, files in os.walk(root) if "m0.pc" in files]
    eq(len(pcs), 1, "installed m0.pc")
    libdir = os.path.dirname(os.path.dirname(pcs[0]))
    return {"PKG_CONFIG_PATH": os.path.dirname(pcs[0]), "PKG_CONFIG_SYSROOT_DIR": root,
            "PATH": os.environ["PATH"]}, libdir


def build_flags():
    """The build's own CFLAGS and LDFLAGS (a sanitizer's, in a sanitizer build), which a
    program linked against its libm0 needs too; "" for a plain build's -O2 -g."""
    with open(os.path.join(build_dir(), "Makefile"), encoding="utf-8") as f:
        text = f.read()
    flags = [m.group(1) for m in re.finditer(r"^(?:CFLAGS|LDFLAGS) = (.*)$", text, re.M)]
    return " ".join(flags) if "-fsanitize" in " ".join(flags) else ""


def test_A7_tutorial_programs_build_and_answer():
    with tempfile.TemporaryDirectory(prefix="m0tutorial-") as tmp:
        env, libdir = install(os.path.join(tmp, "root"))
        work = os.path.join(tmp, "work")
        os.mkdir(work)
        os.symlink(os.path.join(REPO, "apps"), os.path.join(work, "apps"))
        programs, runs, built, transcripts = {}, {}, [], 0
        for lang, name, text in blocks():
            if lang == "c" and name and "/" not in name:
                programs[name] = programs.get(name, "") + text
        for name, text in programs.items():
            with open(os.path.join(work, name), "w", encoding="utf-8") as f:
                f.write(text)
        for lang, name, text in blocks():
            if lang == "sh":
                for cmd, _ in commands(text):
                    if cmd.startswith("cc "):
                        out = subprocess.run(["bash", "-c", f"cc {build_flags()} {cmd[3:]}"],
                                             cwd=work, env=env,
                                             capture_output=True, text=True, timeout=120)
                        eq((out.returncode, out.stderr[-2000:]), (0, ""), f"`{cmd}`")
                        built.append(cmd)
                    elif re.match(r"^(\w+=\S+ )*\./", cmd):
                        words = shlex.split(cmd.replace("$PWD", work).rstrip(" &"))
                        assigns = [w for w in words if re.match(r"^\w+=", w)]
                        prog = words[len(assigns)]
                        runs[prog[2:]] = (dict(a.split("=", 1) for a in assigns),
                                          words[len(assigns) + 1:])
            if lang != "console":
                continue
            transcripts += 1
            check(name in runs, f"the transcript of {name} before a line that starts it")
            extra, args = runs[name]
            s = Server(os.path.join(work, name), args=args,
                       env={"LD_LIBRARY_PATH": libdir, **extra})
            try:
                s.wait_ready()
                for cmd, want in commands(text):
                    real = cmd.replace("localhost:8080", f"127.0.0.1:{s.port}")
                    out = subprocess.run(["bash", "-c", real], cwd=work, capture_output=True,
                                         text=True, timeout=30)
                    eq(out.stdout, want, f"{name}: `{cmd}`")
                eq(s.stop(), 0, f"{name}: the exit after SIGTERM")
            finally:
                s.cleanup()
        eq(sorted(runs), ["hello", "rooms", "sessions", "todo", "todo-mem"], "programs started")
        eq((len(built), transcripts), (5, 5), "builds and transcripts")
        check(os.path.exists(os.path.join(work, "todo.db")), "the todo step's database")
        check(os.path.exists(os.path.join(work, "sessions.db")), "the sessions step's database")
        check(os.path.exists(os.path.join(work, "rooms.db")), "the rooms step's database")


test_A7_tutorial_programs_build_and_answer.once = True  # a compiler: the plain variant only (run.py, D235)


# five builds, a `make install` and step 5's six Argon2 hashes (64 MiB each): over a second each
# on a loaded machine
test_A7_tutorial_programs_build_and_answer.timeout = 240


def test_AP3_hello_builds_against_the_build_tree():
    """Step 1's program, built with -Wall -Wextra -Werror against the build tree itself through
    pkg-config's m0-uninstalled.pc (no `make install`), runs without LD_LIBRARY_PATH, maps the
    build's own libm0 and answers (SPEC AP3, AP1's route table)."""
    hello = "".join(text for lang, name, text in blocks() if lang == "c" and name == "hello.c")
    check("M0_ROUTE(" in hello, "step 1 writes its table with M0_ROUTE()")
    build = os.path.abspath(build_dir())
    with tempfile.TemporaryDirectory(prefix="m0uninstalled-") as work:
        with open(os.path.join(work, "hello.c"), "w", encoding="utf-8") as f:
            f.write(hello)
        env = {"PATH": os.environ["PATH"], "PKG_CONFIG_PATH": build}
        cmd = (f"cc {build_flags()} -Wall -Wextra -Werror -o hello hello.c "
               "$(pkg-config --cflags --libs m0-uninstalled)")
        out = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, capture_output=True,
                             text=True, timeout=120)
        eq((out.returncode, out.stderr[-2000:]), (0, ""), f"`{cmd}`")
        # pkg-config's convention: on PKG_CONFIG_PATH, m0-uninstalled.pc stands in for m0.pc
        out = subprocess.run(["pkg-config", "--libs", "m0"], env=env, capture_output=True,
                             text=True, timeout=30)
        eq(out.stdout.split()[:3], [f"-L{build}/.libs", f"-Wl,-rpath,{build}/.libs", "-lm0"],
           "pkg-config m0 with the build on PKG_CONFIG_PATH")
        s = Server(os.path.join(work, "hello"), env={"LD_LIBRARY_PATH": ""})
        try:
            s.wait_ready()
            c = s.connect()
            r = c.exchange("GET", "/")
            eq((r.status, r.body), (200, b"hello\n"), "GET /")
            with open(f"/proc/{s.pid}/maps", encoding="utf-8") as f:
                libs = {line.split()[-1] for line in f if "libm0.so" in line}
            eq(libs, {os.path.realpath(os.path.join(build, ".libs", "libm0.so.1.0.0"))},
               "the libm0 it mapped")
            eq(s.stop(), 0, "the exit after SIGTERM")
        finally:
            s.cleanup()
