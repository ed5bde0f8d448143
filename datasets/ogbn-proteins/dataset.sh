# Read by scripts/ogb_suite.sh (bash); see datasets/README.md.
raw_dir=ogbn_proteins
prep_args=(--symmetrize)
info=("nodes:     132534" "edges:     79122504 (symmetric" "features:  8" "tasks:     112, multi-label"
      "splits:    test 24679, train 86619, valid 21236")
synth_args=(--kind csbm --nodes 132534 --edges 39561252 --features 8 --classes 8 --tasks 112
            --train-fraction 0.6536 --valid-fraction 0.1602)
