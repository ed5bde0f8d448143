#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Checks the documentation against the repository and the built program.

  check_docs.py links ROOT              every relative link and anchor in the Markdown pages resolves, every
                                        "architecture.md §N" a source cites is a section, and no page or
                                        source points outside the repository (../shared)
  check_docs.py reference ROOT TESSERA  docs/reference/cli.md, config.md and python.md are what gen_reference.sh
                                        writes now, and name every option of every subcommand
  check_docs.py tutorials ROOT TESSERA DATA
                                        every shell block marked <!-- runnable --> in docs/tutorials/ runs, in
                                        order, one bash session per page, in an empty folder, and exits 0
Exit 0: passed; 1: failed (each problem on a line); 77: skipped (what is missing is said).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(\s*)```")


def pages(root):
    found = [os.path.join(root, "README.md"), os.path.join(root, "CHANGELOG.md")]
    for top in ("docs", "datasets", "examples", "python"):
        for folder, _, files in os.walk(os.path.join(root, top)):
            found += [os.path.join(folder, f) for f in files if f.endswith(".md")]
    return sorted(p for p in found if os.path.isfile(p))


def prose(text):
    """The page without its fenced code blocks (links there are examples, not links)."""
    out, inside = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            out.append(line)
    return "\n".join(out)


def slug(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    with open(path) as f:
        return {slug(m.group(2)) for m in re.finditer(r"^(#+)\s+(.*)$", prose(f.read()), re.M)}


def check_links(root):
    problems = []
    for page in pages(root):
        with open(page) as f:
            text = prose(f.read())
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            where = os.path.relpath(page, root)
            if not resolved.startswith(root + os.sep) and resolved != root:
                problems.append(f"{where}: link '{target}' leaves the repository")
            elif not os.path.exists(resolved):
                problems.append(f"{where}: link '{target}': {os.path.relpath(resolved, root)} does not exist")
            elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
                problems.append(f"{where}: link '{target}': no heading '#{anchor}' in {os.path.relpath(resolved, root)}")
    # The repository is self-contained: no page, source or header names the design brief beside it.
    for top in ("README.md", "docs", "src", "apps", "python", "examples", "datasets"):
        start = os.path.join(root, top)
        files = [start] if os.path.isfile(start) else [os.path.join(d, f) for d, _, fs in os.walk(start) for f in fs]
        for path in files:
            try:
                text = open(path, encoding="utf-8").read()
            except (UnicodeDecodeError, OSError):
                continue
            if "../shared" in text or "shared/DESIGN" in text:
                problems.append(f"{os.path.relpath(path, root)}: points at ../shared")
    problems += check_snippets(root) + check_message_paths(root) + check_section_citations(root)
    return problems, f"{len(pages(root))} pages"


SNIPPET = re.compile(r"<!-- snippet: (\S+) (\S+) -->\n```[a-z]*\n(.*?)```", re.S)


def snippet(path, name):
    """The lines of `path` between `// [snippet NAME]` and `// [end snippet]`, dedented."""
    lines = open(path).read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip().startswith(f"// [snippet {name}]")), None)
    if start is None:
        return None
    end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == "// [end snippet]")
    block = lines[start + 1:end]
    indent = min(len(line) - len(line.lstrip()) for line in block if line.strip())
    return "\n".join(line[indent:] for line in block).rstrip() + "\n"


def check_snippets(root):
    """Code blocks marked <!-- snippet: FILE NAME --> are that region of FILE, character for character."""
    problems = []
    for page in pages(root):
        for file, name, block in SNIPPET.findall(open(page).read()):
            where = os.path.relpath(page, root)
            source = os.path.join(root, file)
            text = snippet(source, name) if os.path.exists(source) else None
            if text is None:
                problems.append(f"{where}: snippet '{name}' of {file}: no such region")
            elif text != block:
                problems.append(f"{where}: snippet '{name}' differs from {file} (copy the region into the page)")
    return problems


def check_message_paths(root):
    """Every docs/ or datasets/ page a message of the program or the package names exists."""
    problems = []
    for top in ("src", "apps", "python/tessera", "scripts"):
        for folder, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if not f.endswith((".cpp", ".hpp", ".py", ".sh")):
                    continue
                path = os.path.join(folder, f)
                for named in set(re.findall(r"(?:docs|datasets)/[\w./-]+\.md", open(path, encoding="utf-8").read())):
                    if not os.path.exists(os.path.join(root, named)):
                        problems.append(f"{os.path.relpath(path, root)}: names {named}, which does not exist")
    return problems


CITATION = re.compile(r"architecture(?:\.md)?(?:\]\([^)]*\))? ?§(\d+)")


def check_section_citations(root):
    """Every "architecture.md §N" a source or page cites (and every §N inside that page) is a numbered section."""
    page = os.path.join(root, "docs", "architecture.md")
    text = open(page).read()
    sections = set(re.findall(r"^## (\d+)\. ", text, re.M))
    problems = [f"docs/architecture.md: cites §{n}, which is not a section"
                for n in sorted(set(re.findall(r"§(\d+)", prose(text)))) if n not in sections]
    for top in ("src", "apps", "python", "tests", "scripts", "docs", "examples", "README.md"):
        start = os.path.join(root, top)
        files = [start] if os.path.isfile(start) else [os.path.join(d, f) for d, _, fs in os.walk(start) for f in fs]
        for path in files:
            if not path.endswith((".cpp", ".hpp", ".py", ".sh", ".md", ".txt", ".cmake")):
                continue
            for n in sorted(set(CITATION.findall(open(path, encoding="utf-8").read()))):
                if n not in sections:
                    problems.append(f"{os.path.relpath(path, root)}: cites docs/architecture.md §{n}, which is not a section")
    return problems


def check_reference(root, tessera):
    problems = []
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, TESSERA=tessera)
        subprocess.run(["bash", os.path.join(root, "scripts/gen_reference.sh"), out], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        for name in ("cli.md", "config.md", "python.md"):
            committed = os.path.join(root, "docs/reference", name)
            if not os.path.exists(committed) or open(committed).read() != open(os.path.join(out, name)).read():
                problems.append(f"docs/reference/{name} is stale: run scripts/gen_reference.sh and commit it")
    cli = open(os.path.join(root, "docs/reference/cli.md")).read()
    commands = [[], ["prep"], ["prep", "ogb"], ["prep", "synth"], ["info"], ["train"], ["plan"], ["partition"],
                ["bench", "comm"], ["bench", "spmm"], ["bench", "gemm"], ["bench", "stream"]]
    options = 0
    for command in commands:
        text = subprocess.run([tessera] + command + ["--help"], capture_output=True, text=True, check=True).stdout
        for option in sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text))):
            options += 1
            if option not in cli:
                problems.append(f"tessera {' '.join(command)} {option}: not in docs/reference/cli.md")
    return problems, f"{options} options"


def runnable_blocks(page):
    blocks, current, marked = [], None, False
    for line in open(page):
        if current is None:
            if line.strip() == "<!-- runnable -->":
                marked = True
            elif FENCE.match(line):
                current = [] if marked else None
                marked = False
                if current is None:  # an unmarked block: skip to its end
                    current = False
            elif line.strip():
                marked = False
        elif FENCE.match(line):
            if current is not False:
                blocks.append("".join(current))
            current = None
        elif current is not False:
            current.append(line)
    return blocks


def check_tutorials(root, tessera, data):
    if not os.path.isdir(os.path.join(data, "cora")):
        print(f"skipped: {data}/cora is absent (the tutorials run on Cora)")
        sys.exit(77)
    problems, ran = [], 0
    # `tessera data get cora` in the tutorials downloads from a mirror: Planetoid's files of Cora, made from the
    # OGB-layout copy (tests/fixtures/make_planetoid_mirror.py), as TESSERA_DATA_MIRROR points a compute node
    # at a copy.
    mirror = tempfile.mkdtemp(prefix="tessera-mirror-")
    subprocess.run([sys.executable, os.path.join(root, "tests/fixtures/make_planetoid_mirror.py"),
                    os.path.join(data, "cora"), mirror], check=True)
    folder = os.path.join(root, "docs/tutorials")
    for name in sorted(os.listdir(folder)):
        blocks = runnable_blocks(os.path.join(folder, name))
        if not blocks:
            continue
        script = "set -euo pipefail\n" + "\n".join(blocks)
        # Debian's python3 (with NumPy and matplotlib) before another python3 that may come first on PATH.
        env = dict(os.environ, DATA=data, TESSERA_ROOT=root, PYTHONDONTWRITEBYTECODE="1", TESSERA_DATA_MIRROR=mirror,
                   # The build's package (with the bindings, where built) before the source tree's.
                   PYTHONPATH=os.pathsep.join([os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(tessera))),
                                                            "python"),
                                               os.path.join(root, "python"), os.environ.get("PYTHONPATH", "")]),
                   PATH=os.pathsep.join([os.path.dirname(tessera), "/usr/bin", os.environ["PATH"]]))
        with tempfile.TemporaryDirectory() as work:
            result = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True,
                                    timeout=600)
        ran += len(blocks)
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).splitlines()[-15:])
            problems.append(f"docs/tutorials/{name}: runnable blocks exit {result.returncode}:\n{tail}")
        else:
            print(f"docs/tutorials/{name}: {len(blocks)} runnable blocks ran")
    shutil.rmtree(mirror, ignore_errors=True)
    if ran == 0:
        problems.append("docs/tutorials: no block marked <!-- runnable -->")
    return problems, f"{ran} runnable blocks"


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    what, root = sys.argv[1], os.path.realpath(sys.argv[2])
    if what == "links":
        problems, done = check_links(root)
    elif what == "reference":
        problems, done = check_reference(root, sys.argv[3])
    elif what == "tutorials":
        problems, done = check_tutorials(root, sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(__doc__)
    for p in problems:
        print("FAILED:", p)
    print(f"check_docs {what}: {done}, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
