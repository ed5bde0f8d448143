# Read by scripts/ogb_suite.sh (bash); see datasets/README.md. The symmetrized edge count is not checked
# (OGB publishes the directed count only).
raw_dir=ogbn_papers100M
prep_args=(--symmetrize)
info=("nodes:     111059956" "features:  128" "classes:   172" "splits:    test 214338, train 1207179, valid 125265")
synth_args=(--kind csbm --nodes 111059956 --edges 1615685872 --features 128 --classes 172
            --train-fraction 0.01087 --valid-fraction 0.00113)
