# SPDX-License-Identifier: BSD-3-Clause
"""python3 -m tessera.convert FORMAT IN OUT.h5: a downloaded dataset into a Tessera graph file.

FORMAT is planetoid (IN: the directory of ind.NAME.*, --name NAME), gnn-benchmark (IN: the .npz), npz
(plain arrays; Tolokers, Questions, ... with --split-index K and --binary-task), graphsaint (IN: the
directory; Yelp and PPI become multi-label graphs), reddit (IN: the directory of DGL's / PyG's files), ogb
(an OGB node dataset's directory) or ogbl (an OGB link dataset's: its edge splits become link splits).
Errors are one line on stderr naming the file and the problem, exit status 1, and nothing written.
"""
import argparse
import os
import sys

from .graph import largest_connected_component, per_class_split, random_link_split, write_graph
from .readers import READERS


def parse(argv):
    p = argparse.ArgumentParser(prog="tessera-convert", description=__doc__.split("\n\n")[0])
    p.add_argument("format", choices=sorted(READERS))
    p.add_argument("input", help="the dataset's file or directory")
    p.add_argument("output", help="the Tessera graph file to write (.h5)")
    p.add_argument("--name", help="planetoid: the dataset's name in its file names (cora, citeseer, pubmed); "
                                  "any format: the graph's name in the file")
    p.add_argument("--lcc", action="store_true", help="keep the largest (weakly) connected component only")
    p.add_argument("--per-class-split", action="store_true",
                   help="replace the splits by a random per-class split (gnn-benchmark always has one)")
    p.add_argument("--train-per-class", type=int, default=20, help="per-class split: training nodes per class")
    p.add_argument("--valid-per-class", type=int, default=30, help="per-class split: validation nodes per class")
    p.add_argument("--seed", type=int, default=0, help="per-class split and link split: the seed")
    p.add_argument("--split-index", type=int, default=0, help="npz: which of several masks (rows) to use")
    p.add_argument("--binary-task", action="store_true",
                   help="two-class labels (0 and 1) as one binary task of a multi-label graph, scored by ROC-AUC "
                        "as the heterophilous benchmarks score Tolokers, Questions and Minesweeper")
    p.add_argument("--link-split", metavar="VALID,TEST",
                   help="hold out these shares of the edges as a link task's validation and test positives, with "
                        "as many sampled non-edges as negatives (PyG's RandomLinkSplit; --seed seeds it), e.g. "
                        "0.05,0.1")
    p.add_argument("--feature-dtype", choices=("f32", "bf16"), default="f32",
                   help="store the node features as f32 (default) or bf16: half the bytes, each value rounded to "
                        "nearest even; every command reads them back as the fp32 values they stand for")
    p.add_argument("--no-symmetrize", action="store_true",
                   help="keep the edges as the file lists them (default: every edge in both directions, once)")
    return p.parse_args(argv)


def convert(a):
    inputs = [a.input]
    if os.path.isdir(a.input):  # the files a directory format reads (OGB's in raw/ and split/KIND/)
        inputs = [os.path.join(folder, name) for folder, _, names in os.walk(a.input) for name in names]
    if any(os.path.exists(i) and os.path.exists(a.output) and os.path.samefile(i, a.output) for i in inputs):
        raise ValueError(f"{a.output}: the output names an input file; choose another path")
    if a.format == "planetoid":
        if not a.name:
            raise ValueError("planetoid needs --name (cora, citeseer, pubmed: the NAME of ind.NAME.x)")
        graph = READERS["planetoid"](a.input, a.name)
    elif a.format == "gnn-benchmark":
        graph = READERS["gnn-benchmark"](a.input, a.train_per_class, a.valid_per_class, a.seed)
    elif a.format == "npz":
        graph = READERS["npz"](a.input, a.split_index)
    else:
        graph = READERS[a.format](a.input)
    if a.lcc:
        graph = largest_connected_component(graph)
    if a.per_class_split or (a.lcc and a.format == "gnn-benchmark"):
        graph.splits = per_class_split(graph.y, a.train_per_class, a.valid_per_class, a.seed)
    if a.name:
        graph.name = a.name
    if a.binary_task:
        graph.y = binary_task(graph.y, a.input)
    if a.link_split:
        try:
            valid, test = (float(v) for v in a.link_split.split(","))
        except ValueError:
            raise ValueError(f"--link-split: expected VALID,TEST shares such as 0.05,0.1, not '{a.link_split}'") from None
        graph, graph.link_splits = random_link_split(graph, valid, test, a.seed, undirected=not a.no_symmetrize)
    sizes = write_graph(a.output, symmetrize=not a.no_symmetrize, feature_dtype=a.feature_dtype, **graph.arrays())
    splits = ", ".join(f"{s} {k}" for s, k in sizes["splits"].items())
    labels = "tasks (multi-label)" if sizes["multi_label"] else "classes"
    labels = f"{sizes['classes']} {labels}" if sizes["classes"] else "no node labels"
    features = f"{sizes['features']} {'bf16 ' if sizes['feature_dtype'] == 'bf16' else ''}features"
    print(f"wrote {a.output}: {sizes['nodes']} nodes, {sizes['edges']} edges, {features}, {labels}" +
          (f" ({splits})" if splits else "") +
          "".join(f"; link {s}: {link_text(d)}" for s, d in sizes["link_splits"].items()))


def link_text(shapes):
    """'12 edges + 15 negatives' / '12 edges x 6 negatives each' from write_graph's link split shapes."""
    text = f"{shapes['edges'][0]} edges"
    if "negatives" in shapes:
        text += f" + {shapes['negatives'][0]} negatives"
    if "negative_targets" in shapes:
        text += f" x {shapes['negative_targets'][1]} negatives each"
    return text


def binary_task(y, source):
    """Labels 0 and 1 (-1 unlabeled) as the one column of a multi-label graph."""
    import numpy as np
    y = np.asarray(y)
    if y.ndim != 1 or (y.size and (y.min() < -1 or y.max() > 1)):
        top = int(y.max()) if y.ndim == 1 and y.size else None
        raise ValueError(f"{source}: --binary-task needs labels 0 and 1 (-1 unlabeled), "
                         f"not {'a label matrix' if y.ndim != 1 else f'label {top}'}")
    return y.reshape(-1, 1)


def main(argv=None):
    a = parse(sys.argv[1:] if argv is None else argv)
    try:
        convert(a)
    except (ValueError, OSError) as e:
        print(f"tessera-convert: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
