# SPDX-License-Identifier: MIT
"""The PostgreSQL bus is a module loaded only when M0_BUS names a database (SPEC LY4, G1; D210):
a host on the local bus maps neither it nor libpq, a host naming a database maps both, and a
module that is missing or of another version is a refusal (78) naming the package."""

import os
import subprocess
import tempfile

from m0test import Server, build_dir, check, eq, run_app, tool

# ThreadSanitizer runs this module (the bus thread of the module it loads): run.py, D235.
THREADED = True

# A database nobody answers at: the host serves without it (--bus-ready-ms), as G3 says.
NOWHERE = "postgresql:///m0?host=/nonexistent-m0-bus"
PACKAGE = "m0-bus-postgresql"


def _maps(s):
    with open(f"/proc/{s.pid}/maps", encoding="utf-8") as f:
        return {line.split()[5] for line in f if len(line.split()) > 5}


def _named(paths, part):
    return sorted(p for p in paths if part in os.path.basename(p))


def _status(s, path):
    c = s.connect()
    try:
        return c.get(path).status
    finally:
        c.close()


def _bus_line(out):
    lines = [x for x in out.splitlines() if x.startswith("check bus")]
    eq(len(lines), 1, out)
    return lines[0]


def test_LY4_G1_the_local_bus_maps_no_libpq_and_a_database_bus_loads_its_module():
    module = os.path.join(build_dir(), ".libs", "bus-pg.so")
    check(os.path.exists(module), f"{module} is built")
    with Server("host_check") as s:
        s.wait_ready()
        maps = _maps(s)
        eq(len(_named(maps, "libm0.so")), 1, f"libm0 is mapped: {sorted(maps)}")
        eq(_named(maps, "libpq"), [], "the local bus maps no libpq")
        eq(_named(maps, "bus-pg"), [], "the local bus maps no module")
        eq(_named(maps, "libgssapi"), [], "nor what libpq brings")
        eq(_status(s, "/health"), 200, "it serves")
    with Server("host_check", env={"M0_BUS": NOWHERE, "M0_BUS_READY_MS": "200"}) as s:
        s.wait_ready()
        maps = _maps(s)
        eq(_named(maps, "bus-pg"), [os.path.realpath(module)], "the module, from its path")
        pq = _named(maps, "libpq.so.5")
        eq(len(pq), 1, f"libpq with it: {sorted(maps)}")
        s.wait_log(r"bus: the database did not answer within --bus-ready-ms \(200 ms\)")
        eq(_status(s, "/health"), 200, "it serves")


test_LY4_G1_the_local_bus_maps_no_libpq_and_a_database_bus_loads_its_module.once = True  # what the build maps, not how it was compiled: the plain variant only (run.py, D235)


def test_G1_a_missing_module_is_refused_78_naming_the_package():
    env = {"M0_BUS": NOWHERE, "M0_BUS_PG_MODULE": "/nonexistent-m0/bus-pg.so"}
    finding = ("M0_BUS='postgresql:///m0?host=/nonexistent-m0-bus': the PostgreSQL bus's module "
               "cannot be loaded (/nonexistent-m0/bus-pg.so: cannot open shared object file: No "
               "such file or directory)")
    fix = f"install the package {PACKAGE} of libm0's version, or set M0_BUS to local"
    rc, out, err = run_app("host_check", [], env=env)
    eq(rc, 78, err)
    check(f"bus: {finding} ({fix})" in err, err)
    rc, out, _ = run_app("host_check", ["--doctor"], env=env)
    eq(rc, 78, out)
    eq(_bus_line(out), f"check bus                      FAIL  {finding} ({fix})", "the doctor")
    rc, out, _ = run_app("host_check", ["--doctor"], env={"M0_BUS_PG_MODULE": "/nonexistent-m0"})
    eq(_bus_line(out), "check bus                      ok    local: the in-process bus",
       "the local bus looks for no module")


def test_G1_a_module_of_another_version_is_refused_78():
    cc = tool("cc", "gcc")
    with tempfile.TemporaryDirectory() as d:
        src, so = os.path.join(d, "old.c"), os.path.join(d, "bus-pg.so")
        with open(src, "w", encoding="utf-8") as f:
            f.write('struct t { unsigned abi; const char *version; };\n'
                    'const struct t m0_bus_pg_module = { 999, "0.0.1" };\n')
        subprocess.run([cc, "-shared", "-fPIC", "-o", so, src], check=True)
        rc, out, _ = run_app("host_check", ["--doctor"], env={"M0_BUS": NOWHERE,
                                                             "M0_BUS_PG_MODULE": so})
        eq(rc, 78, out)
        line = _bus_line(out)
        check(f"FAIL  M0_BUS='{NOWHERE}': the PostgreSQL bus's module {so} is version 0.0.1 "
              "(interface 999), libm0 is " in line and " (interface 1) (install the package "
              f"{PACKAGE} of libm0's version, or set M0_BUS to local)" in line, line)
        empty = os.path.join(d, "empty.so")
        with open(src, "w", encoding="utf-8") as f:
            f.write("int unrelated;\n")
        subprocess.run([cc, "-shared", "-fPIC", "-o", empty, src], check=True)
        rc, out, _ = run_app("host_check", ["--doctor"], env={"M0_BUS": NOWHERE,
                                                             "M0_BUS_PG_MODULE": empty})
        eq(rc, 78, out)
        check(f"FAIL  M0_BUS='{NOWHERE}': {empty} is not the PostgreSQL bus's module (" in
              _bus_line(out), out)
