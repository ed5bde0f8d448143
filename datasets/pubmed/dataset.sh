# Read by scripts/ogb_suite.sh (bash); see datasets/README.md.
raw_dir=pubmed
prep_args=(--symmetrize)
info=("nodes:     19717" "edges:     88648 (symmetric" "features:  500" "classes:   3"
      "splits:    test 1000, train 60, valid 500")
synth_args=(--kind csbm --nodes 19717 --edges 44324 --features 500 --classes 3
            --train-fraction 0.00304 --valid-fraction 0.02536)
