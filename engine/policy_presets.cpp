// The presets (the frameworks' defaults as knob values) and the int8 toolchains' knob bundles;
// the knob table, parsing and printing are in engine/policy.cpp.
#include "engine/policy.h"

#include "core/error.h"

namespace driftlab {

Policy Policy::torch() {
  Policy p;  // the field defaults are PyTorch 1.13's
  p.preset = "torch";
  return p;
}

Policy Policy::tensorflow() {
  Policy p;
  p.preset = "tensorflow";
  p.conv_same_pad = SamePad::after;
  p.conv_kernel_flip = false;
  p.flatten_order = FlattenOrder::hwc;
  p.weight_layout = WeightLayout::hwio;
  p.init_weight = WeightInit::glorot_uniform;
  p.init_bias = BiasInit::zeros;
  p.embedding_init = EmbeddingInit::uniform_0p05;
  // Keras's LossScaleOptimizer (used only with loss_scale=dynamic): initial_scale, the backoff's
  // floor of 1, a skipped step counted in the optimizer's iterations.
  p.loss_scale_init = 32768;
  p.loss_scale_min = 1;
  p.loss_scale_skipped_step = SkippedStep::counted;
  // A mixed policy's Conv2D and Dense add the bias with tf.nn.bias_add after the float16 op.
  p.conv_bias_rounding = p.matmul_bias_rounding = BiasRounding::twice;
  // A mixed policy's LSTM / GRU cell computes in the compute dtype, its states included.
  p.rnn_autocast_rule = RnnAutocastRule::layer;
  // A mixed policy's layers cast their floating inputs to the compute dtype, the first one too.
  p.autocast_input_cast = AutocastInputCast::every_layer;
  p.model_conv_padding = ModelConvPadding::same;
  p.relu_grad_at_zero = 0.0;
  p.relu_grad_at_nan = ReluNanGrad::nan;
  p.maxpool_grad_ties = PoolTies::first;
  p.hard_sigmoid_kind = HardSigmoidKind::linear_0p2;
  p.hard_sigmoid_grad_edges = GradEdges::inclusive;
  p.bn_eps = 1e-3;
  p.bn_momentum = 0.99;
  p.bn_running_var = BnRunningVar::keras_tf;
  p.bn_zero_debias = true;
  p.tf32_conv = false;  // TF 1.x predates TF32 (TF >= 2.4 enables it for matmul and conv)
  p.cudnn_algo_search = AlgoSearch::exhaustive;  // TF_CUDNN_USE_AUTOTUNE defaults to on
  p.cudnn_rnn_algo = RnnAlgoRule::standard;       // cuda_dnn.cc ToCudnnRNNAlgo: the default AlgorithmDesc
  p.rnn_weight_layout = RnnWeightLayout::gate_cols;
  p.gru_gate_order = GruGateOrder::zrh;
  p.rnn_num_bias = RnnNumBias::one;
  p.rnn_recurrent_activation = RnnGateAct::hard_sigmoid;
  p.rnn_kernel_init = RnnKernelInit::glorot_uniform;
  p.rnn_recurrent_init = RnnRecurrentInit::orthogonal;
  p.rnn_bias_init = RnnBiasInit::zeros;
  p.lstm_forget_bias_init = LstmForgetBias::one;
  p.gru_reset_after = GruReset::before;
  p.gru_update_convention = GruUpdate::z_keeps_old;
  p.rnn_mask = RnnMask::none;  // Embedding(mask_zero=False), the Keras 2.2.4 default and imdb_lstm.py's
  p.ce_formulation = CeFormulation::softmax_clip;
  p.ce_clip_eps = 1e-7;
  p.loss_reduction = LossReduction::mean;
  p.sgd_form = SgdForm::keras_velocity;
  p.weight_decay_mode = WeightDecayMode::l2_loss;
  p.weight_decay_on_bias = false;
  // Keras 2.2.4 Adam / RMSprop (keras/optimizers.py@2.2.4), in float32 graph arithmetic.
  p.adam_form = AdamForm::epsilon_hat;
  p.optim_square_order = SquareOrder::square_then_scale;
  p.adam_beta_power = BetaPower::pow_float32;
  p.optim_scalar_precision = ScalarPrecision::float32;
  p.adam_eps = 1e-7;
  p.rmsprop_rho = 0.9;
  p.rmsprop_eps = 1e-7;
  p.plateau_rule = PlateauRule::keras;
  p.optim_fma = OptimFma::none;
  p.rng_engine = RngEngine::philox_u23;
  p.shuffle = ShuffleAlgo::backward_rejection;
  // Kernels: the torch preset's (conv_backend=onednn, gemm_backend=onednn, conv_block_backend=fast).
  // No kernel here sums as TF's or Theano's CPU convolution does: TF's is an Eigen contraction over
  // implicit patches whose index runs kernel column, row, then channel innermost
  // (tensorflow/core/kernels/eigen_spatial_convolutions.h packStandardPatches), with MKL-DNN's sgemm
  // as the block kernel in x86 builds by default since 2019 (eigen_contraction_kernel.h,
  // --define tensorflow_mkldnn_contraction_kernel); Theano's CorrMM is im2col + the BLAS it was linked with.
  // conv_backend=eigen (im2col over channel, row, column + Eigen's gebp) is no closer, and against
  // the oracle that runs here (TF.js) both stay inside the same rounding band (docs/POLICIES.md).
  // A Keras model's int8 form is TFLite's (as in the studies of Guo et al. and Abyane & Hemmati,
  // docs/GLOSSARY.md). Theano has no int8 toolchain: the theano preset inherits this too (a
  // Keras-on-Theano model would be converted the same way).
  apply_quant_toolchain(p, QuantToolchain::tflite);
  return p;
}

Policy Policy::theano() {
  Policy p = tensorflow();  // Keras 2.2.4 on the Theano backend: Keras's layer code, Theano's ops
  p.preset = "theano";
  p.conv_same_pad = SamePad::before;
  p.conv_kernel_flip = true;
  p.relu_grad_at_zero = 0.5;
  p.maxpool_grad_ties = PoolTies::all;
  p.bn_running_var = BnRunningVar::keras_theano;
  p.bn_zero_debias = false;  // Theano backend: plain x*m + v*(1-m)
  p.cudnn_algo_search = AlgoSearch::heuristic;  // dnn.conv.algo_fwd='small': a fixed choice, no autotuning
  p.cudnn_rnn_algo = RnnAlgoRule::standard;       // Theano has no cuDNN RNN in Keras' backend: as TensorFlow
  p.rng_engine = RngEngine::mrg31k3p;
  return p;
}

namespace {
// The dynamic-range (weights-only) knobs of a toolchain (docs/QUANT_SOURCES.md sections S2.4, S2.8).
void apply_dynamic_toolchain(Policy& p, QuantToolchain t) {
  switch (t) {
    case QuantToolchain::torch_qnnpack:
    case QuantToolchain::torch_onednn:
    case QuantToolchain::torch_fbgemm:
      // quantize_dynamic: default_dynamic_qconfig (per-tensor symmetric qint8 weights on every engine);
      // the input's qparams per call (reduce_range=True, honoured by onednn and fbgemm only)
      p.quant_dyn_act = QuantDynAct::affine_double;
      p.quant_dyn_range = t == QuantToolchain::torch_qnnpack ? QuantActRange::full : QuantActRange::reduced;
      p.quant_dyn_weights = QuantDynWeights::per_tensor;
      p.quant_dyn_output = t == QuantToolchain::torch_onednn ? QuantDynOutput::prescaled_bias
                                                             : QuantDynOutput::scale_then_bias;
      p.quant_dyn_input_proj = QuantDynInputProj::whole_sequence;
      p.quant_dyn_gru = QuantDynLayer::int8;
      return;
    case QuantToolchain::ort:  // quantize_dynamic: DynamicQuantizeLinear + MatMulInteger / DynamicQuantizeLSTM
      p.quant_dyn_act = QuantDynAct::affine_float;
      p.quant_dyn_range = QuantActRange::full;
      p.quant_dyn_weights = QuantDynWeights::per_tensor;
      p.quant_dyn_output = QuantDynOutput::scale_then_bias;
      p.quant_dyn_input_proj = QuantDynInputProj::whole_sequence;  // DynamicQuantizeLSTM quantizes X once
      p.quant_dyn_gru = QuantDynLayer::float32;  // quantize_dynamic registers no GRU quantizer
      return;
    case QuantToolchain::tflite:  // dynamic range quantization: hybrid FULLY_CONNECTED / LSTM kernels
      // asymmetric_quantize_inputs=true (the MLIR quantizer sets it on FC and LSTM; TF 2.x default)
      p.quant_dyn_act = QuantDynAct::affine_per_row;
      p.quant_dyn_range = QuantActRange::full;
      // the fused LSTM: one scale per gate matrix (no AffineQuantizedOpInterface); hybrid FC per tensor
      // before the 2.17 runtime (per channel after it: quant_dyn_weights=per_channel)
      p.quant_dyn_weights = QuantDynWeights::per_gate;
      p.quant_dyn_output = QuantDynOutput::scale_then_bias;
      p.quant_dyn_input_proj = QuantDynInputProj::per_step;  // lstm_eval.cc: x_t and h_{t-1} per step
      p.quant_dyn_gru = QuantDynLayer::int8;  // a Keras GRU stays a WHILE loop whose FC ops become hybrid
      return;
  }
}
}  // namespace

void apply_quant_toolchain(Policy& p, QuantToolchain t) {
  p.quant_scheme = t;
  apply_dynamic_toolchain(p, t);
  // Every toolchain's int8 conv/dense computes the integer sum on ARM and on x86 with VNNI; the
  // int16 pairs of x86 without VNNI are a property of the CPU, set by hand (quant_u8s8_dot).
  p.quant_u8s8_dot = DotRule::exact;
  switch (t) {
    case QuantToolchain::tflite:  // TFLite converter, legacy quantizer (tools/optimize): docs/QUANT_SOURCES.md
      p.quant_act_dtype = QuantActDtype::int8;
      p.quant_act_range = QuantActRange::full;
      p.quant_observer = QuantObserver::minmax;
      p.quant_weight_range = QuantWeightRange::narrow;
      p.quant_conv_weights = QuantGranularity::per_channel;
      p.quant_dense_weights = QuantGranularity::per_tensor;
      p.quant_weight_scale_op = WeightScaleOp::mul_inverse_range;
      p.quant_act_scale_op = ScaleOp::divide;
      p.quant_round = RoundRule::half_away;
      p.quant_zp_round = RoundRule::half_away;
      p.quant_zp_form = ZeroPointForm::round_of_difference;
      p.quant_scale_precision = FloatType::float32;
      p.quant_scale_floor = ScaleFloor::none;
      p.quant_bias = QuantBias::int32_mul_reciprocal;
      p.quant_requant = RequantRule::fixed_point_double_rounding;
      p.quant_multiplier = QuantMultiplier::float64;
      p.quant_bias_product = FloatType::float32;
      p.quant_relu = QuantRelu::fused;
      p.quant_add = QuantAdd::tflite_fixed_point;
      p.quant_avg_pool = QuantAvgPool::tflite_integer_mean;
      return;
    case QuantToolchain::torch_qnnpack:
    case QuantToolchain::torch_onednn:
    case QuantToolchain::torch_fbgemm:  // PyTorch 1.13 get_default_qconfig(engine), eager PTQ
      p.quant_act_dtype = QuantActDtype::uint8;
      p.quant_act_range = t == QuantToolchain::torch_fbgemm ? QuantActRange::reduced : QuantActRange::full;
      p.quant_observer = QuantObserver::histogram;
      p.quant_weight_range = QuantWeightRange::full;
      p.quant_conv_weights =
          t == QuantToolchain::torch_qnnpack ? QuantGranularity::per_tensor : QuantGranularity::per_channel;
      p.quant_dense_weights = p.quant_conv_weights;
      p.quant_weight_scale_op = WeightScaleOp::mul_reciprocal;
      p.quant_act_scale_op = ScaleOp::mul_reciprocal;
      p.quant_round = RoundRule::half_even;
      p.quant_zp_round = RoundRule::half_even;
      p.quant_zp_form = ZeroPointForm::qmin_minus_round;
      p.quant_scale_precision = FloatType::float32;
      p.quant_scale_floor = ScaleFloor::float32_eps;
      p.quant_bias =
          t == QuantToolchain::torch_qnnpack ? QuantBias::int32_mul_reciprocal : QuantBias::float_in_requant;
      p.quant_bias_product = FloatType::float64;
      // qnnpack: (s_w*s_in)*(1/s_out), round, + zp; oneDNN: reciprocal scales, + zp before the rounding;
      // fbgemm (read, not run): (s_in*s_w)/s_out.
      p.quant_requant = t == QuantToolchain::torch_onednn ? RequantRule::float_multiply_add_zp : RequantRule::float_multiply;
      p.quant_multiplier = t == QuantToolchain::torch_qnnpack  ? QuantMultiplier::float32_mul_reciprocal
                           : t == QuantToolchain::torch_onednn ? QuantMultiplier::reciprocal_scales
                                                               : QuantMultiplier::float32_divide;
      p.quant_relu = QuantRelu::fused;
      // ATen's qadd_kernel serves every x86 engine (onednn, fbgemm); qnnpack has its own
      p.quant_add = t == QuantToolchain::torch_qnnpack ? QuantAdd::fixed_point_shift : QuantAdd::float_fma_tail64;
      p.quant_avg_pool = QuantAvgPool::float_reciprocal;
      return;
    case QuantToolchain::ort:  // onnxruntime quantize_static defaults (QDQ, QInt8/QInt8, MinMax)
      p.quant_act_dtype = QuantActDtype::int8;
      p.quant_act_range = QuantActRange::full;
      p.quant_observer = QuantObserver::minmax;
      p.quant_weight_range = QuantWeightRange::narrow;
      p.quant_conv_weights = QuantGranularity::per_tensor;
      p.quant_dense_weights = QuantGranularity::per_tensor;
      p.quant_weight_scale_op = WeightScaleOp::divide;
      p.quant_act_scale_op = ScaleOp::divide;
      p.quant_round = RoundRule::half_even;
      p.quant_zp_round = RoundRule::half_even;
      p.quant_zp_form = ZeroPointForm::round_of_difference;
      p.quant_scale_precision = FloatType::float64;
      p.quant_scale_floor = ScaleFloor::tiny_to_one;
      p.quant_bias = QuantBias::int32_divide_f64;
      p.quant_bias_product = FloatType::float32;
      p.quant_requant = RequantRule::float_multiply;
      p.quant_multiplier = QuantMultiplier::float32_divide;  // MLAS: float32(float32(s_in*s_w)/s_out), run (oracles.Ort)
      p.quant_relu = QuantRelu::fused;
      p.quant_add = QuantAdd::ort_qlinear_add;
      p.quant_avg_pool = QuantAvgPool::ort_qlinear_global_avg_pool;
      return;
  }
  fail("policy: unknown quant toolchain ", static_cast<int>(t));
}

void use_reference_kernels(Policy& p) {
  for (KernelBackend Policy::*f : {&Policy::conv_backend, &Policy::conv_block_backend, &Policy::gemm_backend, &Policy::rnn_backend,
                                   &Policy::bn_backend, &Policy::pool_backend, &Policy::act_backend,
                                   &Policy::loss_backend, &Policy::sgd_backend, &Policy::quant_backend})
    p.*f = KernelBackend::reference;
}

// The GPU variants: a framework's defaults on an Ampere-or-later GPU, as knob values over its CPU
// preset (the preset stays the framework's: `torch_gpu` prints as `torch,math_conv=tf32`).
// PyTorch (>= 1.12): cudnn.allow_tf32 = True, cuda.matmul.allow_tf32 = False; TensorFlow (>= 2.4):
// TF32 for both (enable_tensor_float_32_execution). On the CPU the tf32 math modes round every
// operand (docs/REDUCED_PRECISION.md: cuDNN applies TF32 only in the kernels it picks for a shape).
Policy Policy::preset_named(const std::string& name) {
  if (name == "torch") return torch();
  if (name == "tensorflow") return tensorflow();
  if (name == "theano") return theano();
  if (name == "torch_gpu") {
    Policy p = torch();
    p.math_conv = p.math_rnn = MathMode::tf32;  // cudnn.allow_tf32 covers cuDNN's RNN too
    p.tf32_conv = true;
    p.conv_bias_rounding = BiasRounding::twice;  // cuDNN's convolution, then output.add_(bias)
    p.rnn_autocast_rule = RnnAutocastRule::layer;  // CUDA autocast: _cudnn_rnn is one lower-precision op
    return p;
  }
  if (name == "tensorflow_gpu") {
    Policy p = tensorflow();
    p.math_conv = p.math_matmul = p.math_rnn = MathMode::tf32;
    p.tf32_conv = p.tf32_matmul = true;
    return p;
  }
  fail("policy: unknown preset '", name,
       "' (allowed: tensorflow, theano, torch; GPU defaults: tensorflow_gpu, torch_gpu)");
}
}  // namespace driftlab
