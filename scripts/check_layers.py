#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Checks the library's layering from its sources and CMake files, so that it cannot drift:

- every quoted include of src/, apps/, python/ and tests/ names a file by its path: beside the including
  file or from the include root src/ (no include path a build adds is needed to follow it);
- an area's files include only headers of its own area and of the areas its target links (transitively):
  dependencies point one way (docs/architecture.md, "Modules");
- every installed header (an area's HEADERS) includes only installed headers, so an installed Tessera
  compiles for an application.

    scripts/check_layers.py [SOURCE_DIR]

Prints one line per problem and exits 1, or a summary line and exits 0.
"""
import pathlib
import re
import sys

AREA_CALL = re.compile(r"tessera_add_area\((\w+)(.*?)\)", re.S)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
KEYWORDS = {"DIR", "SOURCES", "HEADERS", "PUBLIC", "PRIVATE"}


def parse_area(cmake_file, name, body):
    """One area: its folder under src/tessera, the areas it links and its installed headers."""
    words = body.split()
    lists, key = {k: [] for k in KEYWORDS}, None
    for word in words:
        if word in KEYWORDS:
            key = word
        elif key is not None:
            lists[key].append(word)
    folder = lists["DIR"][0] if lists["DIR"] else name
    links = {w[len("tessera_"):] for w in lists["PUBLIC"] + lists["PRIVATE"] if w.startswith("tessera_")}
    return {"name": name, "dir": folder, "links": links, "headers": set(lists["HEADERS"]), "cmake": cmake_file}


def read_areas(include_root):
    areas = {}
    for cmake_file in sorted((include_root / "tessera").rglob("CMakeLists.txt")):
        for match in AREA_CALL.finditer(cmake_file.read_text()):
            area = parse_area(cmake_file, match.group(1), match.group(2))
            areas[area["name"]] = area
    # The command line's parser is a target of its own that links the whole library (tessera).
    cli = include_root / "tessera" / "cli" / "CMakeLists.txt"
    if cli.exists():
        areas["cli"] = {"name": "cli", "dir": "cli", "links": set(areas), "headers": set(), "cmake": cli}
    return areas


def closure(areas, name):
    seen, todo = set(), [name]
    while todo:
        for dep in areas[todo.pop()]["links"]:
            if dep in areas and dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def area_of(path, areas, include_root):
    """The area whose folder holds `path` most closely (models/nn before models); None outside every area."""
    rel = path.relative_to(include_root / "tessera").as_posix()
    best = None
    for area in areas.values():
        if rel.startswith(area["dir"] + "/") and (best is None or len(area["dir"]) > len(best["dir"])):
            best = area
    return best


def resolve(include, source, include_root):
    for base in (source.parent, include_root):
        candidate = (base / include).resolve()
        if candidate.is_file():
            return candidate
    return None


def check(source_dir):
    include_root = (source_dir / "src").resolve()
    areas = read_areas(include_root)
    if len(areas) < 5:
        return [f"check_layers: found only {len(areas)} areas under {include_root}/tessera"], 0
    reach = {name: closure(areas, name) for name in areas}
    for name in areas:
        if name in reach[name]:
            return [f"check_layers: area {name} depends on itself (a cycle)"], 0
    installed = set()
    for area in areas.values():
        installed |= {(include_root / "tessera" / area["dir"] / h).resolve() for h in area["headers"]}
    problems, includes = [], 0
    files = sorted(p for top in ("src", "apps", "python", "tests") for p in (source_dir / top).rglob("*")
                   if p.suffix in (".hpp", ".cpp", ".h", ".cu") and p.is_file())
    for source in files:
        inside = include_root / "tessera" in source.resolve().parents
        mine = area_of(source, areas, include_root) if inside else None
        for include in INCLUDE.findall(source.read_text(errors="replace")):
            includes += 1
            where = source.relative_to(source_dir)
            target = resolve(include, source, include_root)
            if target is None:
                problems.append(f"{where}: #include \"{include}\" does not resolve (beside the file or from src/)")
                continue
            if ".." in pathlib.PurePosixPath(include).parts and inside:
                problems.append(f"{where}: #include \"{include}\" climbs out of its folder: include it from src/")
            if include_root / "tessera" not in target.parents:
                continue
            theirs = area_of(target, areas, include_root)
            if mine is not None and theirs is not None and theirs is not mine and theirs["name"] not in reach[mine["name"]]:
                problems.append(f"{where}: includes {include} of area {theirs['name']}, which area {mine['name']} "
                                f"does not link ({mine['cmake'].relative_to(source_dir)})")
            if source.resolve() in installed and target not in installed:
                problems.append(f"{where}: an installed header includes {include}, which is not installed "
                                f"(add it to HEADERS in {theirs['cmake'].relative_to(source_dir) if theirs else 'its area'})")
    return problems, includes, len(files), len(areas)


def main():
    source_dir = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    result = check(source_dir.resolve())
    problems = result[0]
    for line in problems:
        print(line)
    if problems:
        return 1
    _, includes, files, areas = result
    print(f"check_layers: {includes} includes in {files} files of {areas} areas resolve and point one way")
    return 0


if __name__ == "__main__":
    sys.exit(main())
