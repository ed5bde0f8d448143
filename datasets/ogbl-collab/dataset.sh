# Read by scripts/ogb_suite.sh (bash); see datasets/README.md. A link dataset: `tessera data get ogbl-collab`
# writes the graph file (the suite uses DATA_ROOT/ogbl-collab.h5); no synthetic stand-in.
task=link
raw_dir=ogbl_collab
prep_args=()
info=("nodes:     235868" "features:  128" "classes:   none (no node labels)"
      "links:     train 1179052 edges, valid 60084 edges + 100000 negatives, test 46329 edges + 100000 negatives")
synth_args=()
