# Read by scripts/ogb_suite.sh (bash); see datasets/README.md.
raw_dir=ogbn_arxiv
prep_args=(--symmetrize)
info=("nodes:     169343" "edges:     2315598 (symmetric" "features:  128" "classes:   40"
      "splits:    test 48603, train 90941, valid 29799")
synth_args=(--kind csbm --nodes 169343 --edges 1157799 --features 128 --classes 40
            --train-fraction 0.5370 --valid-fraction 0.1760)
