// SPDX-License-Identifier: BSD-3-Clause
// An application's own graph layer, trained on a 2x2x1 process grid (4 ranks; 1x1x1 on one rank).
// LeakyGcn is the library's distributed A H W (GraphMultiply: the 3D schedule, padding and block ownership
// stay inside it) followed by this application's epilogue kernel — bias and a leaky ReLU, forward and
// backward, plain Kokkos loops over the block the layer holds. Library layers do the rest.
//   tessera prep ogb <cora> -o cora.h5 --symmetrize
//   mpiexec -n 4 custom_layer cora.h5
#include <cstdio>
#include <tessera/tessera.hpp>

namespace {

using namespace tessera;

// y = leaky_relu(y + bias), in place.
void bias_leaky_relu(const Matrix<float>& y, const Vector<const float>& bias, float slope) {
  Kokkos::parallel_for(
      "app::bias_leaky_relu", Kokkos::RangePolicy<ExecSpace>(0, int64_t(y.extent(0))),
      KOKKOS_LAMBDA(int64_t i) {
        for (size_t j = 0; j < y.extent(1); ++j) {
          const float v = y(i, j) + bias(j);
          y(i, j) = v > 0 ? v : slope * v;
        }
      });
}

// g *= leaky_relu'(pre-activation), read off the output (which has the pre-activation's sign).
void leaky_relu_backward(const Matrix<float>& g, const Matrix<const float>& y, float slope) {
  Kokkos::parallel_for(
      "app::leaky_relu_backward", Kokkos::RangePolicy<ExecSpace>(0, int64_t(g.extent(0))),
      KOKKOS_LAMBDA(int64_t i) {
        for (size_t j = 0; j < g.extent(1); ++j) g(i, j) *= y(i, j) > 0 ? 1.0f : slope;
      });
}

// The whole layer: one GraphMultiply, one RowParameter, two kernels.
// [snippet layer] (docs/tutorials/custom-layer.md shows the lines up to [end snippet]; a docs test compares)
class LeakyGcn : public Layer {
 public:
  LeakyGcn(LayerSlot& slot, int64_t out_width, float slope)
      : multiply_(slot, out_width), bias_(slot, "bias", 0.0f), slope_(slope) {}

  Matrix<const float> forward(const Matrix<const float>& in, const GraphBatch& batch,
                              const PassInfo& pass) override {
    out_ = multiply_.forward(in, batch, pass);      // A H W over the grid
    bias_leaky_relu(out_, bias_.value(), slope_);   // this application's kernel, in place
    return out_;
  }

  Matrix<float> backward(const Matrix<float>& grad, bool want_input_grad, const PassInfo&) override {
    leaky_relu_backward(grad, out_, slope_);
    bias_.gradient_from(grad, KernelPath::Auto, "app bias");
    return multiply_.backward(grad, want_input_grad);
  }

  std::vector<ParameterRef> parameters() override {
    std::vector<ParameterRef> all = multiply_.parameters();
    all.push_back(bias_.ref());
    return all;
  }

  std::string describe() const override {
    return "leaky gcn -> " + std::to_string(multiply_.output_layout().width);
  }

 private:
  GraphMultiply multiply_;
  RowParameter bias_;
  float slope_;
  Matrix<float> out_;
};
// [end snippet]

}  // namespace

int main(int argc, char** argv) {
  return run_main(argc, argv, MPI_THREAD_FUNNELED, [](int argc, char** argv) {
    const Communicator world = Communicator::world();
    world.check(argc == 2, "usage: custom_layer GRAPH.h5 (from tessera prep)");
    const ProcessGrid grid(world,
                           world.size() == 4 ? GridShape{1, 2, 2, 1} : GridShape{1, 1, 1, world.size()});
    Graph3DOptions load;
    load.normalization = Normalization::Symmetric;
    load.normalize_features = true;
    const Graph3D graph = load_graph_3d(GraphFileReader(world, argv[1]), grid, load);

    // [snippet model]
    const uint64_t seed = 1;  // the run's one seed: weights, dropout, sampling
    Sequential model(grid, graph.num_features, RunOptions{}, seed);
    model.add<Dropout>(0.5f);
    model.add<LeakyGcn>(16, 0.1f);          // constructed as LeakyGcn(slot, 16, 0.1f)
    model.add<Dropout>(0.5f);
    model.add<GcnConv>(graph.num_classes);  // library layers mix with yours

    FullGraphSource source(graph, grid, world, model);  // asks the model what its batches need
    TrainerOptions options;                 // fields set by name
    options.optimizer.weight_decay = 5e-4f;
    options.epochs = 200;
    Trainer trainer(model, source, world, options);
    trainer.add_hook(std::make_unique<ConsoleReport>());   // the console line tessera train prints
    const TrainResult r = trainer.run();                    // r.test_at_best, r.history, ...
    // [end snippet]
    if (world.rank() == 0)
      std::printf("custom_layer on grid %s (%s): best valid %.4f at epoch %lld, test accuracy %.4f\n",
                  grid.shape().str().c_str(), model.describe().c_str(), r.best_valid, (long long)r.best_epoch,
                  r.test_at_best);
    return 0;
  });
}
