# SPDX-License-Identifier: BSD-3-Clause
"""Benchmark datasets by name: `tessera data get cora` downloads the files from the addresses their own
loaders use (PyG's, DGL's, OGB's), checks and converts them into a Tessera graph file with the splits their
benchmarks use; `tessera data list` says what is known, what is on disk and how big it is.

    tessera data list [--root DIR]
    tessera data get NAME [--root DIR] [--mirror URL] [--feature-dtype bf16]   (python3 -m tessera.data alike)

Downloads go to ROOT/raw/NAME/ (resumable: an interrupted file is continued where it stopped, by an HTTP
range request; a cut connection is retried), then ROOT/NAME.h5 is written (ROOT/NAME-bf16.h5 with the
features stored in bf16). ROOT is --root, else
$TESSERA_DATA_ROOT, else ./data. A mirror (--mirror, or $TESSERA_DATA_MIRROR: an http(s):// or file:// URL
or a folder) holds the same files as ROOT/raw: MIRROR/NAME/FILE. A SHA256SUMS file in a dataset's mirror
folder (`tessera data get` writes one beside every download) is checked; the publishers give no checksums,
so a download from them is checked against the size their server announces.
"""
import argparse
import hashlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass, field

from ._output import atomic_output

PLANETOID = "https://github.com/kimiyoung/planetoid/raw/master/data"  # PyG's Planetoid.url
GNN_BENCHMARK = "https://github.com/shchur/gnn-benchmark/raw/master/data/npz"  # PyG's Amazon.url, Coauthor.url
DGL = "https://data.dgl.ai/dataset"  # DGL's _get_dgl_url, PyG's Reddit.url
OGB = "http://snap.stanford.edu/ogb/data/nodeproppred"  # OGB's master.csv, url row
OGBL = "http://snap.stanford.edu/ogb/data/linkproppred"  # OGB's linkproppred master.csv, url row


@dataclass
class Dataset:
    """A benchmark dataset: where its files are, how it converts, what the converted file holds."""
    name: str
    kind: str                 # planetoid, gnn-benchmark, reddit, graphsaint, ogb, ogbl
    base: str                 # the publisher's address of `files`
    files: list               # file names under `base`
    nodes: int                # as the publisher's loader documents them (before any largest component)
    edges: int                # likewise: as its documentation counts them
    features: int
    classes: int              # a multi-label dataset's: its tasks
    split: str                # the benchmark's split
    source: str               # whose loader uses these addresses
    sha256: dict = field(default_factory=dict)  # file -> checksum, where the publisher gives one
    extracted: str = ""       # ogb: the folder the zip holds
    multi_label: bool = False  # `classes` counts binary tasks (a label matrix)


def _planetoid(name, nodes, edges, features, classes):
    files = [f"ind.{name}.{part}" for part in ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")]
    return Dataset(name, "planetoid", PLANETOID, files, nodes, edges, features, classes,
                   "public (Yang et al. 2016): 20 per class train, 500 valid, 1000 test", "PyG Planetoid")


def _benchmark(name, file, nodes, edges, features, classes):
    return Dataset(name, "gnn-benchmark", GNN_BENCHMARK, [file], nodes, edges, features, classes,
                   "largest connected component; per class 20 train, 30 valid, the rest test, seed 0 "
                   "(Shchur et al. 2018)", "PyG Amazon / Coauthor")


def _ogb(name, folder, nodes, edges, features, classes, split, multi_label=False):
    zip_name = ("papers100M-bin" if folder == "papers100M-bin" else folder) + ".zip"
    return Dataset(name, "ogb", OGB, [zip_name], nodes, edges, features, classes, split, "OGB NodePropPredDataset",
                   extracted=folder, multi_label=multi_label)


CATALOG = {d.name: d for d in [
    _planetoid("cora", 2708, 10556, 1433, 7),
    _planetoid("citeseer", 3327, 9104, 3703, 6),
    _planetoid("pubmed", 19717, 88648, 500, 3),
    _benchmark("amazon-computers", "amazon_electronics_computers.npz", 13752, 491722, 767, 10),
    _benchmark("amazon-photo", "amazon_electronics_photo.npz", 7650, 238162, 745, 8),
    _benchmark("coauthor-cs", "ms_academic_cs.npz", 18333, 163788, 6805, 15),
    _benchmark("coauthor-physics", "ms_academic_phy.npz", 34493, 495924, 8415, 5),
    Dataset("reddit", "reddit", DGL, ["reddit.zip"], 232965, 114615892, 602, 41,
            "GraphSAGE's: the first 20 days train, the rest test with 30% of it valid (node_types)",
            "DGL RedditDataset, PyG Reddit"),
    _ogb("ogbn-arxiv", "arxiv", 169343, 1166243, 128, 40, "time (OGB)"),
    _ogb("ogbn-products", "products", 2449029, 61859140, 100, 47, "sales_ranking (OGB)"),
    _ogb("ogbn-papers100M", "papers100M-bin", 111059956, 1615685872, 128, 172, "time (OGB)"),
    _ogb("ogbn-proteins", "proteins", 132534, 39561252, 8, 112, "species (OGB); 112 binary tasks, "
         "node features the mean of each node's edge features", multi_label=True),
    Dataset("ogbl-collab", "ogbl", OGBL, ["collab.zip"], 235868, 1285465, 128, 0,
            "time (OGB): edges to 2017 train, 2018 valid, 2019 test; Hits@50 against 100,000 shared negatives",
            "OGB LinkPropPredDataset", extracted="collab"),
    Dataset("ogbl-citation2", "ogbl", OGBL, ["citation-v2.zip"], 2927963, 30561187, 128, 0,
            "time (OGB): each test paper's last citation; MRR against 1,000 negatives per edge",
            "OGB LinkPropPredDataset", extracted="citation-v2"),
    Dataset("yelp", "graphsaint", DGL, ["yelp.zip"], 716847, 13954819, 300, 100,
            "GraphSAINT's role.json (75% train, 10% valid, 15% test); 100 binary tasks", "DGL YelpDataset",
            multi_label=True),
]}


def catalog():
    """The known datasets: the built-in list, with the entries of $TESSERA_DATA_CATALOG (a JSON list of
    Dataset fields) added or replacing those of the same name."""
    entries = dict(CATALOG)
    extra = os.environ.get("TESSERA_DATA_CATALOG")
    if extra:
        try:
            with open(extra) as f:
                for item in json.load(f):
                    entries[item["name"]] = Dataset(**item)
        except (OSError, ValueError, TypeError, KeyError) as e:
            raise ValueError(f"{extra}: not a dataset catalog (TESSERA_DATA_CATALOG: {e})") from None
    return entries


# ---- downloading ---------------------------------------------------------------------------------------

def _size(n):
    return f"{n / 1048576:.1f} MiB" if n >= 1048576 else f"{n / 1024:.1f} KiB"


class Progress:
    """A file's download on stderr: one line rewritten in place on a terminal; elsewhere (a batch job's log)
    a line every 10% of a file over 16 MiB, and one when it is done."""

    def __init__(self, label, total):
        self.label, self.total, self.shown, self.tty = label, total, 0, sys.stderr.isatty()

    def update(self, done):
        if self.tty:
            of = f" of {_size(self.total)} ({100 * done / self.total:3.0f}%)" if self.total else ""
            print(f"\r{self.label}: {_size(done)}{of}", end="", file=sys.stderr, flush=True)
        elif self.total and self.total > 16 << 20 and int(10 * done / self.total) > self.shown:
            self.shown = int(10 * done / self.total)
            print(f"{self.label}: {_size(done)} of {_size(self.total)} ({10 * self.shown}%)", file=sys.stderr,
                  flush=True)

    def finish(self, done):
        if self.tty:
            print("\r\033[K", end="", file=sys.stderr)
        print(f"{self.label}: {_size(done)} downloaded", file=sys.stderr, flush=True)


def _open(url, start):
    request = urllib.request.Request(url, headers={"Range": f"bytes={start}-"} if start else {})
    return urllib.request.urlopen(request, timeout=60)


def download(url, dest, label, attempts=4):
    """Downloads `url` to `dest` through dest.part, continuing a .part left by an earlier attempt or run
    with a range request; retries a cut connection. Returns the bytes."""
    part = dest + ".part"
    for attempt in range(1, attempts + 1):
        have = os.path.getsize(part) if os.path.exists(part) else 0
        try:
            try:
                response = _open(url, have)
            except urllib.error.HTTPError as e:
                if e.code == 416 and have:  # the range starts at the end: the .part is complete
                    break
                raise
            with response:
                if have and response.status != 206:  # the server ignored the range: start over
                    have = 0
                length = response.headers.get("Content-Length")
                total = have + int(length) if length is not None else None
                progress = Progress(label, total)
                with open(part, "ab" if have else "wb") as f:
                    done = have
                    while True:
                        chunk = response.read(1 << 20)
                        if not chunk:
                            break
                        f.write(chunk)
                        done += len(chunk)
                        progress.update(done)
            if total is not None and done != total:
                raise http.client.IncompleteRead(b"", total - done)
            progress.finish(done)
            break
        except urllib.error.HTTPError as e:
            raise ValueError(f"{url}: the server answers {e.code} {e.reason}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            got = os.path.getsize(part) if os.path.exists(part) else 0
            if attempt == attempts:
                raise ValueError(f"{url}: download failed after {attempts} attempts ({e}); {_size(got)} kept in "
                                 f"{part}: run the same command again to continue") from None
            print(f"{label}: connection lost at {_size(got)} ({e}); continuing", file=sys.stderr, flush=True)
            time.sleep(min(2 ** attempt, 10) * 0.1)
    os.replace(part, dest)
    return os.path.getsize(dest)


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _read_sums(text):
    sums = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            sums[parts[1].lstrip("*")] = parts[0].lower()
    return sums


def _mirror_url(mirror):
    """An http(s):// or file:// URL, or a folder (made a file:// URL)."""
    if "://" in mirror:
        return mirror.rstrip("/")
    return "file://" + urllib.request.pathname2url(os.path.abspath(mirror))


def _mirror_sums(mirror, name):
    """The checksums a mirror lists in NAME/SHA256SUMS, or {}."""
    try:
        with urllib.request.urlopen(f"{mirror}/{name}/SHA256SUMS", timeout=60) as r:
            return _read_sums(r.read().decode("utf-8", "replace"))
    except (urllib.error.URLError, OSError, http.client.HTTPException):
        return {}


def fetch(dataset, root, mirror=None):
    """Every file of `dataset` in ROOT/raw/NAME (kept where already there and unrefuted by a checksum),
    checked against the catalog's or the mirror's checksums; ROOT/raw/NAME/SHA256SUMS records them."""
    folder = os.path.join(root, "raw", dataset.name)
    os.makedirs(folder, exist_ok=True)
    base = f"{_mirror_url(mirror)}/{dataset.name}" if mirror else dataset.base
    expected = dict(dataset.sha256)
    if mirror:
        expected.update(_mirror_sums(_mirror_url(mirror), dataset.name))
    recorded = {}
    for file in dataset.files:
        dest = os.path.join(folder, file)
        if not os.path.exists(dest):
            download(f"{base}/{file}", dest, f"{dataset.name}: {file}")
        digest = sha256_of(dest)
        if file in expected and expected[file] != digest:
            os.remove(dest)
            raise ValueError(f"{dest}: sha256 {digest}, but {'the mirror' if mirror else 'the catalog'} lists "
                             f"{expected[file]}; the file was removed (run again to download it anew)")
        recorded[file] = digest
    with atomic_output(os.path.join(folder, "SHA256SUMS"), "the checksums") as temp:
        with open(temp, "w") as f:
            f.writelines(f"{digest}  {file}\n" for file, digest in sorted(recorded.items()))
    return folder


# ---- converting ----------------------------------------------------------------------------------------

def _extract(archive, into):
    """A zip's members into `into`, refusing members that would land outside it."""
    top = os.path.realpath(into)
    try:
        with zipfile.ZipFile(archive) as z:
            for member in z.namelist():
                target = os.path.realpath(os.path.join(into, member))
                if target != top and not target.startswith(top + os.sep):
                    raise ValueError(f"{archive}: member {member} would be written outside {into}; refused")
            z.extractall(into)
    except zipfile.BadZipFile as e:
        raise ValueError(f"{archive}: not a zip archive ({e}); remove it and run again") from None


def _tessera_program():
    program = os.environ.get("TESSERA") or shutil.which("tessera")
    if not program:
        raise ValueError("converting an OGB dataset runs `tessera prep ogb`: put tessera on PATH or set TESSERA")
    return program


def convert(dataset, folder, output, feature_dtype="f32"):
    """The downloaded files of `dataset` in `folder` into the graph file `output` (its features in
    `feature_dtype`: f32, or bf16 bits)."""
    from .graph import largest_connected_component, per_class_split, write_graph
    from .readers import read_gnn_benchmark, read_graphsaint, read_ogbl, read_planetoid, read_reddit
    if dataset.kind == "planetoid":
        graph = read_planetoid(folder, dataset.name)
    elif dataset.kind == "gnn-benchmark":
        whole = read_gnn_benchmark(os.path.join(folder, dataset.files[0]))
        _note_size(dataset, whole.num_nodes)
        graph = largest_connected_component(whole)
        graph.splits = per_class_split(graph.y, 20, 30, seed=0)
    elif dataset.kind == "reddit":
        _extract(os.path.join(folder, dataset.files[0]), folder)
        graph = read_reddit(folder)
    elif dataset.kind == "ogbl":
        _extract(os.path.join(folder, dataset.files[0]), folder)
        graph = read_ogbl(os.path.join(folder, dataset.extracted))
    elif dataset.kind == "graphsaint":
        _extract(os.path.join(folder, dataset.files[0]), folder)
        inner = os.path.join(folder, dataset.name)  # the zip holds the files, or a folder of them
        graph = read_graphsaint(inner if os.path.isfile(os.path.join(inner, "adj_full.npz")) else folder)
    elif dataset.kind == "ogb":
        _extract(os.path.join(folder, dataset.files[0]), folder)
        r = subprocess.run([_tessera_program(), "prep", "ogb", os.path.join(folder, dataset.extracted), "-o",
                            output, "--symmetrize", "--feature-dtype", feature_dtype], capture_output=True, text=True)
        if r.returncode != 0:
            raise ValueError(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "tessera prep ogb failed")
        return
    else:
        raise ValueError(f"{dataset.name}: unknown kind '{dataset.kind}'")
    graph.name = dataset.name
    write_graph(output, symmetrize=True, **{k: v for k, v in graph.arrays().items() if k != "name"},
                name=dataset.name, feature_dtype=feature_dtype)


def _note_size(dataset, nodes):
    """A line where the files hold another node count than the publisher documents (a changed upload)."""
    if dataset.nodes and nodes != dataset.nodes:
        print(f"{dataset.name}: note: the files hold {nodes:,} nodes, the publisher documents {dataset.nodes:,}",
              file=sys.stderr, flush=True)


def _sizes(path):
    import h5py
    with h5py.File(path, "r") as f:
        sizes = {k: int(f.attrs[k]) for k in ("num_nodes", "num_edges", "num_features", "num_classes")}
        task = f.attrs.get("task", b"")
        sizes["outputs"] = "tasks" if (task.decode() if isinstance(task, bytes) else task) == "multi-label" \
            else "classes"
        return sizes


def graph_file(root, name, feature_dtype="f32"):
    """Where `get` keeps the dataset `name`'s graph file: ROOT/NAME.h5, or ROOT/NAME-bf16.h5 (bf16 features)."""
    return os.path.join(root, f"{name}.h5" if feature_dtype == "f32" else f"{name}-{feature_dtype}.h5")


def get(name, root=None, mirror=None, feature_dtype="f32"):
    """Downloads (or finds) and converts the dataset `name`; returns the graph file's path. `feature_dtype`
    bf16 stores the features as bf16 bits, in NAME-bf16.h5 beside NAME.h5 (the same downloads)."""
    if feature_dtype not in ("f32", "bf16"):
        raise ValueError(f"--feature-dtype: expected f32 or bf16, got '{feature_dtype}'")
    datasets = catalog()
    if name not in datasets:
        close = [n for n in datasets if n.replace("ogbn-", "") == name or n.startswith(name)]
        hint = f"; did you mean {close[0]}?" if close else ""
        raise ValueError(f"no dataset named '{name}' (tessera data list shows them){hint}")
    dataset = datasets[name]
    root = root or os.environ.get("TESSERA_DATA_ROOT") or "data"
    mirror = mirror or os.environ.get("TESSERA_DATA_MIRROR") or None
    output = graph_file(root, name, feature_dtype)
    folder = fetch(dataset, root, mirror)
    if not os.path.exists(output):
        print(f"{name}: converting to {output}", file=sys.stderr, flush=True)
        convert(dataset, folder, output, feature_dtype)
    sizes = _sizes(output)
    if dataset.kind != "gnn-benchmark":  # those keep their largest component
        _note_size(dataset, sizes["num_nodes"])
    labels = f"{sizes['num_classes']} {sizes['outputs']}" if sizes["num_classes"] else "no node labels"
    print(f"{name}: {output} ({sizes['num_nodes']} nodes, {sizes['num_edges']} edges, {sizes['num_features']} "
          f"features, {labels}; split: {dataset.split})")
    return output


def _disk(path):
    total = 0
    for folder, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(folder, f)) for f in files)
    return total


def listing(root=None):
    """The table `tessera data list` prints."""
    root = root or os.environ.get("TESSERA_DATA_ROOT") or "data"
    rows = [("name", "nodes", "edges (as published)", "features", "classes", "source", "on disk")]
    for d in catalog().values():
        raw, disk = os.path.join(root, "raw", d.name), []
        for output in (graph_file(root, d.name), graph_file(root, d.name, "bf16")):
            if os.path.exists(output):
                disk.append(f"{output} ({_size(os.path.getsize(output))})")
        if os.path.isdir(raw):
            disk.append(f"downloads {_size(_disk(raw))}")
        outputs = f"{d.classes} tasks" if d.multi_label else str(d.classes) if d.classes else "links"
        rows.append((d.name, f"{d.nodes:,}", f"{d.edges:,}", str(d.features), outputs, d.source,
                     ", ".join(disk) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def main(argv=None):
    p = argparse.ArgumentParser(prog="tessera data", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    lst = sub.add_parser("list", help="the known datasets, and which are on disk")
    lst.add_argument("--root", help="where datasets are kept (default: $TESSERA_DATA_ROOT, else ./data)")
    g = sub.add_parser("get", help="download and convert a dataset")
    g.add_argument("name", help="a dataset name from `tessera data list`")
    g.add_argument("--root", help="where datasets are kept (default: $TESSERA_DATA_ROOT, else ./data)")
    g.add_argument("--mirror", help="a copy of the downloads (URL or folder laid out as ROOT/raw: MIRROR/NAME/FILE; "
                                    "default $TESSERA_DATA_MIRROR)")
    g.add_argument("--feature-dtype", choices=("f32", "bf16"), default="f32",
                   help="store the features as f32 (ROOT/NAME.h5) or bf16 (ROOT/NAME-bf16.h5: half the bytes, each "
                        "value rounded to nearest even)")
    a = p.parse_args(argv)
    try:
        if a.command == "list":
            print(listing(a.root))
        else:
            get(a.name, a.root, a.mirror, a.feature_dtype)
    except BrokenPipeError:  # the reader of stdout went away (tessera data list | head)
        return 0
    except (ValueError, OSError) as e:
        print(f"tessera: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
