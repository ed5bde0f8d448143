# Read by scripts/ogb_suite.sh (bash): where the raw files are, how to convert them, what `tessera info`
# must show after the conversion, and the synthetic stand-in of the same shape (--synthetic).
raw_dir=cora                      # under the suite's --data-root: raw/ and split/ in OGB's layout
prep_args=(--symmetrize)
info=("nodes:     2708" "edges:     10556 (symmetric" "features:  1433" "classes:   7"
      "splits:    test 1000, train 140, valid 500")
synth_args=(--kind csbm --nodes 2708 --edges 5278 --features 1433 --classes 7
            --train-fraction 0.0517 --valid-fraction 0.1846)
