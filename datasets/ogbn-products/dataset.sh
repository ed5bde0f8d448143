# Read by scripts/ogb_suite.sh (bash); see datasets/README.md.
raw_dir=ogbn_products
prep_args=(--symmetrize)
info=("nodes:     2449029" "edges:     123718280 (symmetric" "features:  100" "classes:   47"
      "splits:    test 2213091, train 196615, valid 39323")
synth_args=(--kind csbm --nodes 2449029 --edges 61859140 --features 100 --classes 47
            --train-fraction 0.0803 --valid-fraction 0.0161)
