# Read by scripts/ogb_suite.sh (bash); see datasets/README.md.
raw_dir=reddit
prep_args=(--symmetrize)
info=("nodes:     232965" "edges:     114615892 (symmetric" "features:  602" "classes:   41"
      "splits:    test 55703, train 153431, valid 23831")
synth_args=(--kind csbm --nodes 232965 --edges 57307946 --features 602 --classes 41
            --train-fraction 0.6586 --valid-fraction 0.1023)
