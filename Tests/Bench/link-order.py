#!/usr/bin/env python3
"""Writes the order in which the linker lays out authd's functions (`make link-order`).

Usage: link-order.py RELEASE_BIN_DIR OUTPUT

The kernel maps a program's code in 64 KiB steps around each page it first runs, so functions
that run are best kept together: then a daemon's resident code is about the size of the code it
runs. This runs `authd-bench scale --accounts 10` (a hub: TLS links, registrations, sign-ins,
published keys and sync, at a smaller scale than the bench's figure) with the hub under
callgrind, and writes the name of every function of authd's binary that ran, hottest first, for
lld's --symbol-ordering-file (Package.swift).

lld moves every function of a listed name, and a helper several files emit has a copy in each,
some of them inside the static runtime's undivided sections. Leaving such names out cost more
resident code than moving those sections along (measured with the bench's hub RSS row).
"""
import bisect
import collections
import glob
import os
import shutil
import subprocess
import sys
import tempfile

ACCOUNTS = 10
DEADLINE = 1200  # seconds for the whole profiled run; a hub under callgrind runs about 50x slower


def executed_addresses(profile):
    """Instruction addresses in authd's binary that ran, with their instruction counts."""
    counts = collections.Counter()
    in_authd = False
    call_site = False
    with open(profile) as lines:
        for line in lines:
            if line.startswith('ob='):
                in_authd = line.rstrip().endswith('/authd.profiled')
            elif line.startswith('calls='):
                call_site = True  # the next cost line is the callee's inclusive cost
            elif line.startswith('0x'):
                fields = line.split()
                if in_authd:
                    counts[int(fields[0], 16)] += 0 if call_site else int(fields[1])
                call_site = False
    return counts


def function_symbols(binary):
    """(start, size, name) of every sized function symbol, by start."""
    listing = subprocess.run(['nm', '--defined-only', '-S', binary], capture_output=True, text=True, check=True).stdout
    symbols = []
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[2] in 'tTwW' and int(fields[1], 16) > 0:
            symbols.append((int(fields[0], 16), int(fields[1], 16), fields[3]))
    symbols.sort()
    return symbols


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split('\n\n')[1])
    bin_dir, output = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix='authd-link-order-')
    try:
        run = os.path.join(work, 'bin')
        os.mkdir(run)
        for name in os.listdir(bin_dir):  # the programs and libraries, not the build's objects
            path = os.path.join(bin_dir, name)
            program = name.startswith(('authd', 'authctl')) and os.path.isfile(path) and os.access(path, os.X_OK)
            if program or name.endswith('.so'):
                shutil.copy2(path, run)
        # valgrind cannot read the DWARF lld writes; the symbol table is all this needs.
        subprocess.run(['strip', '--strip-debug', '-o', os.path.join(run, 'authd.profiled'), os.path.join(bin_dir, 'authd')], check=True)
        wrapper = os.path.join(run, 'authd')
        os.remove(wrapper)
        with open(wrapper, 'w') as script:
            # The bench gives its daemons a bare environment: absolute paths only.
            script.write('#!/bin/sh\nexec /usr/bin/valgrind --tool=callgrind --dump-instr=yes --compress-strings=no '
                         f'--compress-pos=no --callgrind-out-file={work}/callgrind.%p {run}/authd.profiled "$@"\n')
        os.chmod(wrapper, 0o755)
        print(f'link-order: running a hub of {ACCOUNTS} accounts under callgrind (about two minutes)', flush=True)
        bench = subprocess.run([os.path.join(run, 'authd-bench'), run, 'scale', '--accounts', str(ACCOUNTS)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=DEADLINE)
        if bench.returncode != 0:
            sys.exit(bench.stdout + f'link-order: the profiled run failed (exit {bench.returncode})')

        counts = collections.Counter()
        for profile in glob.glob(os.path.join(work, 'callgrind.*')):
            counts.update(executed_addresses(profile))
        if not counts:
            sys.exit('link-order: callgrind recorded nothing in authd')

        symbols = function_symbols(os.path.join(run, 'authd.profiled'))
        starts = [start for start, _, _ in symbols]
        cost = collections.Counter()  # symbol index -> instructions run in it
        for address, count in counts.items():
            index = bisect.bisect_right(starts, address) - 1
            if index >= 0 and address < symbols[index][0] + symbols[index][1]:
                cost[index] += count + 1
        names = {}  # a dict keeps the order: hottest first
        for index, _ in cost.most_common():
            names[symbols[index][2]] = None
        with open(output, 'w') as out:
            out.write('# The functions a hub runs, hottest first, for lld --symbol-ordering-file (Package.swift).\n'
                      '# Written by `make link-order` (Tests/Bench/link-order.py); do not edit.\n')
            out.writelines(name + '\n' for name in names)
        print(f'link-order: {len(names)} functions ran ({sum(symbols[i][1] for i in cost) / 1024:.0f} KiB of code); written to {output}')
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
