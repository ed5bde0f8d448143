# Read by scripts/ogb_suite.sh (bash); see datasets/README.md.
raw_dir=yelp
prep_args=(--symmetrize)
info=("nodes:     716847" "features:  300" "tasks:     100, multi-label")
synth_args=(--kind csbm --nodes 716847 --edges 6977410 --features 300 --classes 10 --tasks 100
            --train-fraction 0.75 --valid-fraction 0.10)
