# Read by scripts/ogb_suite.sh (bash); see datasets/README.md.
raw_dir=citeseer
prep_args=(--symmetrize)
info=("nodes:     3327" "edges:     9104 (symmetric" "features:  3703" "classes:   6"
      "splits:    test 1000, train 120, valid 500")
synth_args=(--kind csbm --nodes 3327 --edges 4552 --features 3703 --classes 6
            --train-fraction 0.0361 --valid-fraction 0.1503)
