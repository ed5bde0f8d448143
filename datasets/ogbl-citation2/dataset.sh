# Read by scripts/ogb_suite.sh (bash); see datasets/README.md. A link dataset: `tessera data get
# ogbl-citation2` writes the graph file (the suite uses DATA_ROOT/ogbl-citation2.h5); no synthetic stand-in.
task=link
raw_dir=ogbl_citation2
prep_args=()
info=("nodes:     2927963" "features:  128" "classes:   none (no node labels)"
      "links:     train 30387995 edges, valid 86596 edges x 1000 negatives each, test 86596 edges x 1000 negatives each")
synth_args=()
