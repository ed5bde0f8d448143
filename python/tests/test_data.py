# SPDX-License-Identifier: BSD-3-Clause
"""`tessera data`: datasets by name from a loopback HTTP server the test starts (127.0.0.1 only), serving
fixture files in the publishers' layouts. Download, conversion, a cut connection resumed by a range request,
an interrupted run continued, a checksum refused, a zip that would write outside its folder refused, Cora word
for word from a Planetoid copy of it, and `list`."""
import http.server
import json
import os
import subprocess
import sys
import threading
import zipfile

import h5py
import numpy as np
import pytest

import tessera
import tessera.graph
from conftest import ROOT, convert, tessera_program
from test_readers import C, N, write_graphsaint, write_planetoid

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
CORA = os.path.join(os.environ.get("DATASETS", os.path.join(ROOT, "datasets")), "cora")  # ctest sets DATASETS


class Server:
    """Serves `folder` on 127.0.0.1 with range requests; the first response for each path in `cut` stops
    half way and closes the connection. Records each request's path and Range header."""

    def __init__(self, folder, cut=()):
        self.folder, self.cut, self.requests = folder, set(cut), []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append((self.path, self.headers.get("Range")))
                path = os.path.join(server.folder, self.path.lstrip("/"))
                if not os.path.isfile(path):
                    self.send_error(404)
                    return
                data = open(path, "rb").read()
                start = 0
                if self.headers.get("Range", "").startswith("bytes="):
                    start = int(self.headers["Range"][6:].split("-")[0])
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                if self.path in server.cut:
                    server.cut.discard(self.path)
                    self.wfile.write(data[start:start + (len(data) - start) // 2])
                    self.close_connection = True
                    return
                self.wfile.write(data[start:])

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def data_command(*args, catalog=None, env=None):
    """`tessera data ARGS...` through the program (which runs this package's tessera.data)."""
    environment = dict(os.environ, TESSERA_PYTHONPATH=os.path.join(ROOT, "python"))
    environment.pop("TESSERA_DATA_MIRROR", None)
    environment.update(env or {})
    if catalog is not None:
        environment["TESSERA_DATA_CATALOG"] = catalog
    return subprocess.run([tessera_program(), "data", *map(str, args)], capture_output=True, text=True,
                          env=environment)


def catalog_file(tmp_path, entries):
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(entries))
    return str(path)


def toy_planetoid(tmp_path, name="toy"):
    rng = np.random.default_rng(3)
    n = 700
    src, dst = rng.integers(0, n, 3000), rng.integers(0, n, 3000)
    truth = dict(edges=np.vstack([src[src != dst], dst[src != dst]]), x=rng.random((n, 8)).astype(np.float32),
                 y=rng.integers(0, 4, n))
    folder = tmp_path / "site" / name
    folder.mkdir(parents=True)
    write_planetoid(folder, truth)
    for f in folder.iterdir():  # write_planetoid names its files ind.toy.*
        f.rename(folder / f.name.replace("ind.toy.", f"ind.{name}."))
    files = [f"ind.{name}.{p}" for p in ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")]
    return folder, dict(name=name, kind="planetoid", files=files, nodes=n, edges=0, features=8, classes=4,
                        split="public", source="a test")


@pytest.fixture
def program_built():
    if not os.access(tessera_program(), os.X_OK):
        pytest.skip("no tessera program (build first)")


def test_get_downloads_resumes_a_cut_connection_and_converts(tmp_path, program_built, program):
    folder, entry = toy_planetoid(tmp_path)
    server = Server(tmp_path / "site", cut={"/toy/ind.toy.allx"})
    try:
        entry["base"] = f"{server.url}/toy"
        r = data_command("get", "toy", "--root", tmp_path / "d", catalog=catalog_file(tmp_path, [entry]))
    finally:
        server.close()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "toy: ind.toy.allx: connection lost at" in r.stderr and "continuing" in r.stderr
    ranges = [rng for path, rng in server.requests if path == "/toy/ind.toy.allx"]
    assert ranges[0] is None and ranges[1] is not None and ranges[1].startswith("bytes="), server.requests
    for name in entry["files"]:  # the bytes as published
        assert (tmp_path / "d" / "raw" / "toy" / name).read_bytes() == (folder / name).read_bytes()
    assert "toy: " in r.stdout and "(700 nodes" in r.stdout
    info = program("info", tmp_path / "d" / "toy.h5").stdout
    assert "valid:     yes" in info
    sums = (tmp_path / "d" / "raw" / "toy" / "SHA256SUMS").read_text()
    assert len(sums.splitlines()) == 8
    # --feature-dtype bf16: from the same downloads (the server is gone), NAME-bf16.h5 of the rounded bits.
    r = data_command("get", "toy", "--root", tmp_path / "d", "--feature-dtype", "bf16",
                     catalog=catalog_file(tmp_path, [entry]))
    assert r.returncode == 0 and "toy-bf16.h5" in r.stdout, r.stdout + r.stderr
    assert "(stored in bf16)" in program("info", tmp_path / "d" / "toy-bf16.h5").stdout
    with h5py.File(tmp_path / "d" / "toy.h5") as a, h5py.File(tmp_path / "d" / "toy-bf16.h5") as b:
        assert np.array_equal(b["node/features"][:], tessera.graph.bf16_bits(a["node/features"][:]))
        assert np.array_equal(a["graph/indices"][:], b["graph/indices"][:])
    listing = data_command("list", "--root", tmp_path / "d", catalog=catalog_file(tmp_path, [entry])).stdout
    assert "toy.h5 (" in listing and "toy-bf16.h5 (" in listing, listing
    r = data_command("get", "toy", "--root", tmp_path / "d", "--feature-dtype", "f16",
                     catalog=catalog_file(tmp_path, [entry]))
    assert r.returncode == 2 and "--feature-dtype: invalid choice: 'f16'" in r.stderr, r.stderr
    with pytest.raises(ValueError, match="--feature-dtype: expected f32 or bf16, got 'f16'"):
        tessera.get_dataset("toy", root=str(tmp_path / "d"), feature_dtype="f16")
    assert not (tmp_path / "d" / "toy-f16.h5").exists()


def test_an_interrupted_run_continues_where_it_stopped(tmp_path, program_built):
    folder, entry = toy_planetoid(tmp_path)
    (tmp_path / "d" / "raw" / "toy").mkdir(parents=True)
    # A run killed half way through ind.toy.tx left its .part: the next asks for the rest only.
    data = (folder / "ind.toy.tx").read_bytes()
    (tmp_path / "d" / "raw" / "toy" / "ind.toy.tx.part").write_bytes(data[:1000])
    server = Server(tmp_path / "site")
    try:
        entry["base"] = f"{server.url}/toy"
        r = data_command("get", "toy", "--root", tmp_path / "d", catalog=catalog_file(tmp_path, [entry]))
    finally:
        server.close()
    assert r.returncode == 0, r.stderr
    assert ("/toy/ind.toy.tx", "bytes=1000-") in server.requests
    assert (tmp_path / "d" / "raw" / "toy" / "ind.toy.tx").read_bytes() == data


def test_a_mirror_checksum_that_does_not_match_is_refused(tmp_path, program_built):
    folder, entry = toy_planetoid(tmp_path)
    (folder / "SHA256SUMS").write_text("0" * 64 + "  ind.toy.graph\n")
    server = Server(tmp_path / "site")
    try:
        entry["base"] = "https://unreachable.invalid/toy"  # a mirror replaces the publisher's address
        r = data_command("get", "toy", "--root", tmp_path / "d", "--mirror", server.url,
                         catalog=catalog_file(tmp_path, [entry]))
    finally:
        server.close()
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("tessera: error: ") and "ind.toy.graph: sha256 " in lines[-1]
    assert "but the mirror lists 0000" in lines[-1] and "the file was removed" in lines[-1]
    assert not (tmp_path / "d" / "raw" / "toy" / "ind.toy.graph").exists()
    assert not (tmp_path / "d" / "toy.h5").exists()


def test_ogb_zip_from_a_folder_mirror_converts_with_prep_ogb(tmp_path, program_built, program):
    subprocess.run([sys.executable, os.path.join(FIXTURES, "make_ogb_fixture.py"), str(tmp_path / "ogb" / "tiny")],
                   check=True, capture_output=True)
    (tmp_path / "mirror" / "toy-ogb").mkdir(parents=True)
    with zipfile.ZipFile(tmp_path / "mirror" / "toy-ogb" / "tiny.zip", "w") as z:
        for folder, _, files in os.walk(tmp_path / "ogb"):
            for f in files:
                path = os.path.join(folder, f)
                z.write(path, os.path.relpath(path, tmp_path / "ogb"))
    entry = dict(name="toy-ogb", kind="ogb", base="https://unreachable.invalid", files=["tiny.zip"], nodes=50,
                 edges=120, features=6, classes=3, split="random", source="a test", extracted="tiny")
    r = data_command("get", "toy-ogb", "--root", tmp_path / "d", "--mirror", tmp_path / "mirror",
                     catalog=catalog_file(tmp_path, [entry]))
    assert r.returncode == 0, r.stderr
    program("prep", "ogb", tmp_path / "ogb" / "tiny", "-o", tmp_path / "direct.h5", "--symmetrize")
    with h5py.File(tmp_path / "d" / "toy-ogb.h5") as a, h5py.File(tmp_path / "direct.h5") as b:
        for key in ("graph/indptr", "graph/indices", "node/features", "node/labels", "split/train"):
            assert np.array_equal(a[key][:], b[key][:]), key
    listing = data_command("list", "--root", tmp_path / "d", catalog=catalog_file(tmp_path, [entry])).stdout
    row = next(line for line in listing.splitlines() if line.startswith("toy-ogb"))
    assert "toy-ogb.h5" in row and "downloads" in row
    r = data_command("get", "toy-ogb", "--root", tmp_path / "d", "--mirror", tmp_path / "mirror", "--feature-dtype",
                     "bf16", catalog=catalog_file(tmp_path, [entry]))
    assert r.returncode == 0, r.stderr
    with h5py.File(tmp_path / "d" / "toy-ogb.h5") as a, h5py.File(tmp_path / "d" / "toy-ogb-bf16.h5") as b:
        assert b.attrs["version"] == 3 and b["node/features"].attrs["dtype"] in ("bf16", b"bf16")
        assert np.array_equal(b["node/features"][:], tessera.graph.bf16_bits(a["node/features"][:]))


def test_multi_label_datasets_convert_by_name(tmp_path, program_built, program):
    """Yelp's kind (a GraphSAINT-layout zip, as DGL serves it) over HTTP and ogbn-proteins' (an OGB zip of its
    layout) from a mirror: multi-label graph files equal to the converters' own, which the datasets' recipes
    train; list and get say tasks."""
    rng = np.random.default_rng(5)
    folder = tmp_path / "site" / "toy-yelp"
    folder.mkdir(parents=True)
    src, dst = rng.integers(0, N, 3000), rng.integers(0, N, 3000)
    truth = dict(edges=np.vstack([src[src != dst], dst[src != dst]]), x=rng.random((N, 5)).astype(np.float32),
                 y=rng.integers(0, C, N))
    write_graphsaint(folder, truth, multi_label=True)
    with zipfile.ZipFile(tmp_path / "site" / "toy-yelp.zip", "w") as z:
        for f in folder.iterdir():
            z.write(f, f"toy-yelp/{f.name}")
    subprocess.run([sys.executable, os.path.join(FIXTURES, "make_ogb_fixture.py"), str(tmp_path / "ogb" / "toyp"),
                    "--layout", "proteins"], check=True, capture_output=True)
    (tmp_path / "mirror" / "toy-proteins").mkdir(parents=True)
    with zipfile.ZipFile(tmp_path / "mirror" / "toy-proteins" / "toyp.zip", "w") as z:
        for root, _, files in os.walk(tmp_path / "ogb"):
            for f in files:
                z.write(os.path.join(root, f), os.path.relpath(os.path.join(root, f), tmp_path / "ogb"))
    server = Server(tmp_path / "site")
    try:
        entries = [dict(name="toy-yelp", kind="graphsaint", base=server.url, files=["toy-yelp.zip"], nodes=N,
                        edges=0, features=5, classes=C, split="role.json", source="a test", multi_label=True),
                   dict(name="toy-proteins", kind="ogb", base="https://unreachable.invalid", files=["toyp.zip"],
                        nodes=0, edges=0, features=0, classes=0, split="species", source="a test",
                        extracted="toyp", multi_label=True)]
        catalog = catalog_file(tmp_path, entries)
        r = data_command("get", "toy-yelp", "--root", tmp_path / "d", catalog=catalog)
        assert r.returncode == 0 and f"{C} tasks" in r.stdout, r.stderr
        r = data_command("get", "toy-proteins", "--root", tmp_path / "d", "--mirror", tmp_path / "mirror",
                         catalog=catalog)
        assert r.returncode == 0 and "tasks;" in r.stdout, r.stderr
    finally:
        server.close()
    assert convert("graphsaint", folder, tmp_path / "yelp.h5").returncode == 0
    program("prep", "ogb", tmp_path / "ogb" / "toyp", "-o", tmp_path / "proteins.h5", "--symmetrize")
    for name, direct in (("toy-yelp", "yelp.h5"), ("toy-proteins", "proteins.h5")):
        with h5py.File(tmp_path / "d" / f"{name}.h5") as a, h5py.File(tmp_path / direct) as b:
            assert a["node/labels"].ndim == 2 and a.attrs["task"] in ("multi-label", b"multi-label"), name
            for key in ("graph/indptr", "graph/indices", "node/features", "node/labels", "split/train"):
                assert np.array_equal(a[key][:], b[key][:]), (name, key)
    # Each mode's recipe of the dataset the toy stands for trains on it (two epochs), scored by its metric.
    for name, recipes, metric in (("toy-yelp", "yelp", "f1_micro"), ("toy-proteins", "ogbn-proteins", "roc_auc")):
        for mode in ("full", "minibatch", "sampled"):
            grid = ["--grid", "1x1x1x1"] if mode == "minibatch" else []
            out = program("train", "--config", os.path.join(ROOT, "datasets", recipes, f"{mode}.toml"), "--data",
                          tmp_path / "d" / f"{name}.h5", "--epochs", "2", "--eval-every", "1", "--hidden", "8",
                          *grid).stdout
            assert f"{metric}  train" in out, out
    listing = data_command("list", catalog=catalog).stdout
    assert f"{C} tasks" in next(line for line in listing.splitlines() if line.startswith("toy-yelp")), listing
    builtin = data_command("list").stdout
    for name, tasks in (("ogbn-proteins", "112 tasks"), ("yelp", "100 tasks")):
        assert tasks in next(line for line in builtin.splitlines() if line.startswith(name + " ")), builtin


def test_an_ogb_link_dataset_converts_by_name(tmp_path, program_built, program):
    """An OGB link dataset's zip (its split in one split_dict.pt here) from a mirror: the graph file holds its
    link splits as read_ogbl reads them; list names the built-in link datasets."""
    fixture = os.path.join(FIXTURES, "make_ogbl_fixture.py")
    subprocess.run([sys.executable, fixture, str(tmp_path / "ogb" / "toyl"), "--split-dict"], check=True,
                   capture_output=True)
    subprocess.run([sys.executable, fixture, str(tmp_path / "three")], check=True, capture_output=True)
    want = tessera.read_ogbl(str(tmp_path / "three")).link_splits  # the same splits in three files
    (tmp_path / "mirror" / "toy-collab").mkdir(parents=True)
    with zipfile.ZipFile(tmp_path / "mirror" / "toy-collab" / "toyl.zip", "w") as z:
        for root, _, files in os.walk(tmp_path / "ogb"):
            for f in files:
                z.write(os.path.join(root, f), os.path.relpath(os.path.join(root, f), tmp_path / "ogb"))
    entry = dict(name="toy-collab", kind="ogbl", base="https://unreachable.invalid", files=["toyl.zip"], nodes=40,
                 edges=90, features=5, classes=0, split="time", source="a test", extracted="toyl")
    catalog = catalog_file(tmp_path, [entry])
    r = data_command("get", "toy-collab", "--root", tmp_path / "d", "--mirror", tmp_path / "mirror", catalog=catalog)
    assert r.returncode == 0 and "no node labels" in r.stdout, r.stderr
    with h5py.File(tmp_path / "d" / "toy-collab.h5") as f:
        for name, parts in want.items():
            for part, pairs in parts.items():
                assert np.array_equal(f[f"link/{name}/{part}"][:], pairs.T), (name, part)
    assert os.listdir(tmp_path / "ogb" / "toyl" / "split" / "time") == ["split_dict.pt"]
    # The link datasets' recipes train on graphs of their layouts (three epochs), scored by their metrics.
    subprocess.run([sys.executable, fixture, str(tmp_path / "c2"), "--layout", "citation2"], check=True,
                   capture_output=True)
    assert convert("ogbl", tmp_path / "c2", tmp_path / "c2.h5").returncode == 0
    for recipes, data, metric in (("ogbl-collab", tmp_path / "d" / "toy-collab.h5", "hits@50"),
                                  ("ogbl-citation2", tmp_path / "c2.h5", "mrr")):
        out = program("train", "--config", os.path.join(ROOT, "datasets", recipes, "full.toml"), "--data", data,
                      "--epochs", "3", "--hidden", "8", "--embedding-dim", "8").stdout
        assert f"{metric}  train" in out, out
    builtin = data_command("list").stdout
    for name in ("ogbl-collab", "ogbl-citation2"):
        assert "links" in next(line for line in builtin.splitlines() if line.startswith(name + " ")), builtin


def test_a_zip_member_outside_its_folder_is_refused(tmp_path, program_built):
    (tmp_path / "mirror" / "evil").mkdir(parents=True)
    with zipfile.ZipFile(tmp_path / "mirror" / "evil" / "evil.zip", "w") as z:
        z.writestr("../../escaped.txt", "x")
    entry = dict(name="evil", kind="ogb", base="https://unreachable.invalid", files=["evil.zip"], nodes=1, edges=0,
                 features=1, classes=1, split="-", source="a test", extracted="evil")
    r = data_command("get", "evil", "--root", tmp_path / "d", "--mirror", tmp_path / "mirror",
                     catalog=catalog_file(tmp_path, [entry]))
    assert r.returncode == 1 and "would be written outside" in r.stderr
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "d" / "escaped.txt").exists()


def test_unknown_names_and_unreachable_servers_are_one_line(tmp_path, program_built):
    r = data_command("get", "arxiv", "--root", tmp_path / "d")
    assert r.returncode == 1 and r.stderr.strip() == ("tessera: error: no dataset named 'arxiv' (tessera data list "
                                                      "shows them); did you mean ogbn-arxiv?")
    server = Server(tmp_path)  # serves an empty folder: 404
    try:
        r = data_command("get", "cora", "--root", tmp_path / "d", "--mirror", server.url)
    finally:
        server.close()
    assert r.returncode == 1 and r.stderr.strip().splitlines()[-1].endswith("answers 404 Not Found")


@pytest.mark.skipif(not os.path.isdir(CORA), reason="no Cora in OGB layout under $DATASETS")
def test_cora_by_name_equals_the_ogb_layout_conversion(tmp_path, program_built, program):
    subprocess.run([sys.executable, os.path.join(FIXTURES, "make_planetoid_mirror.py"), CORA,
                    str(tmp_path / "mirror")], check=True)
    r = data_command("get", "cora", "--root", tmp_path / "d", env={"TESSERA_DATA_MIRROR": str(tmp_path / "mirror")})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("cora: ") and "(2708 nodes, 10556 edges, 1433 features, 7 classes" in r.stdout
    program("prep", "ogb", CORA, "-o", tmp_path / "ogb.h5", "--symmetrize")
    with h5py.File(tmp_path / "d" / "cora.h5") as a, h5py.File(tmp_path / "ogb.h5") as b:
        for key in ("graph/indptr", "graph/indices", "node/features", "node/labels", "split/train", "split/valid",
                    "split/test"):
            assert np.array_equal(a[key][:], b[key][:]), key
    again = data_command("get", "cora", "--root", tmp_path / "d", env={"TESSERA_DATA_MIRROR": "/nonexistent"})
    assert again.returncode == 0, again.stderr  # on disk already: nothing fetched
