#!/usr/bin/env python3
"""Generate the fixture sysfs trees under tests/data/sysfs/ (only the files the reader reads).

    python3 gen_sysfs.py                 # regenerate the synthetic trees
    python3 gen_sysfs.py --out DIR       # write them under DIR instead (reproducibility check)
    python3 gen_sysfs.py --capture /sys vm-2cpu   # copy this machine's real files into sysfs/vm-2cpu

Each tree's root stands for /sys. The synthetic trees follow the kernel's conventions: an
offline CPU keeps its cpuN directory (with online = 0) but has no topology/ or cache/; cache
shared_cpu_list and node cpulist name online CPUs only.
"""
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "sysfs")

CPU_TOP_FILES = ["physical_package_id", "die_id", "core_id", "core_cpus_list", "thread_siblings_list"]
CACHE_FILES = ["level", "type", "size", "shared_cpu_list", "id", "coherency_line_size", "ways_of_associativity"]


def to_list(cpus):
    cpus = sorted(set(cpus))
    out, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")


def set_out(path):
    global OUT
    OUT = path


class Machine:
    """cpus: id -> dict(package, die, core); caches: list of (level, type, size, cpus, id)."""

    def __init__(self, name):
        self.name = name
        self.cpus = {}
        self.caches = []
        self.nodes = {}  # id -> (cpus, mem_kb)
        self.offline = set()
        self.no_topology = set()
        self.no_core_id = set()
        self.pmus = {}  # "cpu_core" -> cpus
        self.with_nodes = True
        self.with_caches = True
        self.write_present = True

    def cpu(self, cpu, package, core, die=0):
        self.cpus[cpu] = dict(package=package, core=core, die=die)

    def cache(self, level, ctype, size, cpus, cid, ways=8):
        self.caches.append((level, ctype, size, sorted(cpus), cid, ways))

    def emit(self):
        self.root = os.path.join(OUT, self.name)
        shutil.rmtree(self.root, ignore_errors=True)
        base = os.path.join(self.root, "devices/system/cpu")
        ids = sorted(self.cpus)
        online = [c for c in ids if c not in self.offline]
        write(f"{base}/possible", to_list(ids))
        if self.write_present:
            write(f"{base}/present", to_list(ids))
        write(f"{base}/online", to_list(online))
        write(f"{base}/offline", to_list(self.offline))
        core_of = {}
        for c in ids:
            t = self.cpus[c]
            core_of.setdefault((t["package"], t["die"], t["core"]), []).append(c)
        for c in ids:
            d = f"{base}/cpu{c}"
            if c in self.offline:
                write(f"{d}/online", "0")
                continue
            if c != 0:
                write(f"{d}/online", "1")
            if c in self.no_topology:
                continue
            t = self.cpus[c]
            sib = [s for s in core_of[(t["package"], t["die"], t["core"])] if s not in self.offline]
            write(f"{d}/topology/physical_package_id", str(t["package"]))
            write(f"{d}/topology/die_id", str(t["die"]))
            if c not in self.no_core_id:
                write(f"{d}/topology/core_id", str(t["core"]))
            write(f"{d}/topology/core_cpus_list", to_list(sib))
            write(f"{d}/topology/thread_siblings_list", to_list(sib))
        if self.with_caches:
            for c in online:
                idx = 0
                for (level, ctype, size, cpus, cid, ways) in sorted(self.caches, key=lambda x: (x[0], x[1] != "Data")):
                    if c not in cpus:
                        continue
                    d = f"{base}/cpu{c}/cache/index{idx}"
                    write(f"{d}/level", str(level))
                    write(f"{d}/type", ctype)
                    write(f"{d}/size", size)
                    write(f"{d}/shared_cpu_list", to_list(x for x in cpus if x not in self.offline))
                    write(f"{d}/id", str(cid))
                    write(f"{d}/coherency_line_size", "64")
                    write(f"{d}/ways_of_associativity", str(ways))
                    idx += 1
        if self.with_nodes:
            nbase = os.path.join(self.root, "devices/system/node")
            for n, (cpus, mem_kb) in sorted(self.nodes.items()):
                write(f"{nbase}/node{n}/cpulist", to_list(x for x in cpus if x not in self.offline))
                write(f"{nbase}/node{n}/meminfo", f"Node {n} MemTotal:       {mem_kb} kB")
        for pmu, cpus in self.pmus.items():
            write(os.path.join(self.root, "devices", pmu, "cpus"), to_list(cpus))


def xeon_2s_smt():
    # 2 sockets x 8 cores x 2 threads, Intel numbering: thread 0 of every core first
    # (socket 0 then socket 1), then thread 1. Xeon core ids are not contiguous.
    m = Machine("xeon-2s-smt")
    core_ids = [0, 1, 2, 3, 4, 8, 9, 10]
    for thread in range(2):
        for s in range(2):
            for i, core in enumerate(core_ids):
                m.cpu(thread * 16 + s * 8 + i, s, core)
    for s in range(2):
        sock = [c for c in m.cpus if m.cpus[c]["package"] == s]
        for i in range(8):
            cpus = [s * 8 + i, 16 + s * 8 + i]
            cid = s * 8 + i
            m.cache(1, "Data", "48K", cpus, cid, 12)
            m.cache(1, "Instruction", "32K", cpus, cid, 8)
            m.cache(2, "Unified", "1280K", cpus, cid, 20)
        m.cache(3, "Unified", "12288K", sock, s, 12)
        m.nodes[s] = (sock, 64 * 1024 * 1024)
    m.offline = {30, 31}
    return m


def amd_epyc_ccx():
    # EPYC 7302P-like: 1 package, 16 cores x 2 threads, 4-core CCXs each with its own 16 MiB L3.
    m = Machine("amd-epyc-ccx")
    for thread in range(2):
        for core in range(16):
            m.cpu(thread * 16 + core, 0, core)
    for core in range(16):
        cpus = [core, core + 16]
        m.cache(1, "Data", "32K", cpus, core, 8)
        m.cache(1, "Instruction", "32K", cpus, core, 8)
        m.cache(2, "Unified", "512K", cpus, core, 8)
    for ccx in range(4):
        cores = range(ccx * 4, ccx * 4 + 4)
        m.cache(3, "Unified", "16384K", [c for c in cores] + [c + 16 for c in cores], ccx, 16)
    m.nodes[0] = (list(range(32)), 128 * 1024 * 1024)
    return m


def intel_hybrid():
    # Alder Lake-like: 8 P-cores with SMT (CPUs 0-15, siblings adjacent), 8 E-cores (16-23) in
    # two 4-core clusters sharing an L2 each, one L3 for all.
    m = Machine("intel-hybrid")
    for p in range(8):
        for t in range(2):
            m.cpu(2 * p + t, 0, 4 * p)
        cpus = [2 * p, 2 * p + 1]
        m.cache(1, "Data", "48K", cpus, 4 * p, 12)
        m.cache(1, "Instruction", "32K", cpus, 4 * p, 8)
        m.cache(2, "Unified", "1280K", cpus, p, 10)
    for e in range(8):
        cpu = 16 + e
        m.cpu(cpu, 0, 32 + e)
        m.cache(1, "Data", "32K", [cpu], 32 + e, 8)
        m.cache(1, "Instruction", "64K", [cpu], 32 + e, 8)
    for cl in range(2):
        m.cache(2, "Unified", "2048K", list(range(16 + 4 * cl, 20 + 4 * cl)), 8 + cl, 16)
    m.cache(3, "Unified", "30720K", list(range(24)), 0, 12)
    m.nodes[0] = (list(range(24)), 32 * 1024 * 1024)
    m.pmus = {"cpu_core": list(range(16)), "cpu_atom": list(range(16, 24))}
    return m


def broken():
    # No cache/ or node/ directories, no present file, cpu3 online without topology/,
    # cpu2 without core_id (only its sibling lists).
    m = Machine("broken")
    for c in range(4):
        m.cpu(c, 0, c)
    m.no_topology = {3}
    m.no_core_id = {2}
    m.with_caches = False
    m.with_nodes = False
    m.write_present = False
    return m


def capture(src, name):
    """Copy the files the reader reads from a live sysfs root into sysfs/<name>."""
    dst = os.path.join(OUT, name)
    shutil.rmtree(dst, ignore_errors=True)

    def cp(rel):
        s = os.path.join(src, rel)
        if os.path.isfile(s):
            with open(s) as f:
                write(os.path.join(dst, rel), f.read().strip())

    cpu = "devices/system/cpu"
    for f in ["possible", "present", "online", "offline"]:
        cp(f"{cpu}/{f}")
    for e in sorted(os.listdir(os.path.join(src, cpu))):
        if not (e.startswith("cpu") and e[3:].isdigit()):
            continue
        cp(f"{cpu}/{e}/online")
        for f in CPU_TOP_FILES:
            cp(f"{cpu}/{e}/topology/{f}")
        cdir = os.path.join(src, cpu, e, "cache")
        if os.path.isdir(cdir):
            for idx in sorted(os.listdir(cdir)):
                if idx.startswith("index"):
                    for f in CACHE_FILES:
                        cp(f"{cpu}/{e}/cache/{idx}/{f}")
    ndir = os.path.join(src, "devices/system/node")
    if os.path.isdir(ndir):
        for n in sorted(os.listdir(ndir)):
            if n.startswith("node") and n[4:].isdigit():
                cp(f"devices/system/node/{n}/cpulist")
                ms = os.path.join(ndir, n, "meminfo")
                if os.path.isfile(ms):
                    with open(ms) as f:
                        line = next((l for l in f if "MemTotal:" in l), None)
                    if line:
                        write(os.path.join(dst, f"devices/system/node/{n}/meminfo"), line.strip())
    for pmu in ["cpu_core", "cpu_atom"]:
        cp(f"devices/{pmu}/cpus")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--capture":
        capture(sys.argv[2], sys.argv[3])
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--out":
        set_out(sys.argv[2])
    elif len(sys.argv) != 1:
        sys.exit(__doc__)
    for m in [xeon_2s_smt(), amd_epyc_ccx(), intel_hybrid(), broken()]:
        m.emit()


if __name__ == "__main__":
    main()
