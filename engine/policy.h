// Policy: every framework-specific choice as a named, switchable knob.
//
// A Policy is a plain value. It is parsed from a string ("torch", "tensorflow,relu_grad_at_zero=0.5"),
// prints back to the same canonical string, and diffs against another Policy knob by knob.
// Kernels never see it: layers resolve it once into explicit op parameters (core/ops/*.h).
//
// To add a knob: 1) add the field below with a one-line comment naming the framework behaviour;
// 2) set its value in each preset in policy.cpp (tensorflow(), theano(), torch());
// 3) add its KnobInfo row in policy.cpp (name, values, per-framework doc);
// 4) implement it where it is resolved (grep the field name) and add a test showing its effect;
// 5) add its row to docs/POLICIES.md (a test checks the two lists agree).
#pragma once
#include <string>
#include <vector>

#include "core/ops/activation.h"
#include "core/ops/adaptive.h"
#include "core/ops/common.h"
#include "core/ops/conv2d.h"
#include "core/ops/pool2d.h"
#include "core/ops/quantize.h"
#include "core/ops/reduced_precision.h"
#include "core/ops/requant.h"
#include "core/ops/sgd.h"
#include "core/ops/softmax_xent.h"

namespace driftlab {

// 'same' padding when the total pad P is odd, and whether strided 'same' is allowed.
enum class SamePad {
  after,          // TF GetWindowedOutputSize: before=floor(P/2), the extra pad bottom/right
  before,         // Keras 2.2.4 on Theano: half padding then crop to ceil(n/s): extra top/left
  after_stride1,  // PyTorch padding='same': extra right, refused for stride > 1
  half_strided,   // stride 1 as after_stride1; stride > 1: (dk-1)/2 on every side, the padding=k//2 PyTorch
                  // code writes for a strided 'same' conv (torchvision, keras#19291); even dk refused there
};
enum class FlattenOrder { chw, hwc };       // NCHW view(N,-1) vs Keras channels_last flatten
enum class WeightLayout { oihw, hwio };     // torch OIHW / (out,in) vs Keras HWIO / (in,out)
enum class WeightInit { glorot_uniform, kaiming_uniform_sqrt5 };
enum class BiasInit { zeros, uniform_fan_in };
enum class HardSigmoidKind { linear_0p2, relu6_div6 };  // clip(0.2x+.5) vs min(max(x+3,0),6)/6
enum class GradEdges { inclusive, exclusive };
enum class LossReduction { mean, sum };
enum class RngEngine { mt19937_u24, philox_u23, mrg31k3p };
enum class ShuffleAlgo { forward_modulo, backward_rejection, none };
enum class FloatType { float32, float64 };
// What BatchNorm averages into its running variance (resolved per input rank by the layer).
enum class BnRunningVar { biased, unbiased, keras_tf, keras_theano, lasagne_inv_std };
// Recurrent layers (LSTM, GRU). The logical LSTM gate order is i,f,c(=g),o in Keras and torch
// alike; what differs is the packed layout (rnn_weight_layout) and, for the GRU, the order.
enum class RnnWeightLayout { gate_rows, gate_cols };  // torch weight_ih (G*u,in) vs Keras kernel (in,G*u)
enum class GruGateOrder { rzn, zrh };
enum class RnnNumBias { one, two };
enum class RnnGateAct { sigmoid, hard_sigmoid };
enum class RnnKernelInit { glorot_uniform, uniform_inv_sqrt_hidden };
enum class RnnRecurrentInit { orthogonal, uniform_inv_sqrt_hidden };
enum class RnnBiasInit { zeros, uniform_inv_sqrt_hidden };
enum class LstmForgetBias { one, as_bias_init };
enum class LstmPeepholes { none, lasagne };  // Lasagne LSTMLayer(peepholes=True): i,f see c_{t-1}, o sees c_t
enum class GruReset { before, after };
enum class GruUpdate { z_keeps_old, z_takes_new };
enum class EmbeddingInit {
  uniform_0p05,  // Keras 2.2.4 Embedding(embeddings_initializer='uniform') = RandomUniform(-0.05, 0.05)
  normal_1,      // PyTorch nn.Embedding.reset_parameters: init.normal_(weight), N(0, 1)
};
// Adam's beta^t: pow in double (Python numbers), pow in float32 (graph tensors), or the float32
// running product kept in a variable (beta at step 1, times beta after every step).
enum class BetaPower { pow_float64, pow_float32, product_float32 };
// The precision the optimiser's per-step scalars (1-beta, bias corrections, step sizes, decayed
// rates) are formed in: host doubles (PyTorch's Python, TF.js's JavaScript) or float32 tensors.
enum class ScalarPrecision { float64, float32 };
enum class RmspropInit { zeros, ones };
// The optimiser's multiply-adds: every operation rounded (Keras, TF1, TF.js, PyTorch under
// ATEN_CPU_CAPABILITY=default), or PyTorch's add(alpha)/addcmul as one fma (its vectorised CPU
// kernels: ATen's add with alpha is Vectorized fmadd).
enum class OptimFma { none, aten };
// epsilon_hat's step size lr_t = lr*sqrt(1-b2^t)/(1-b1^t) as Keras groups it, lr*(sqrt/(..)), or as
// TF1's ApplyAdam and Lasagne do, (lr*sqrt)/(..): one rounding apart.
enum class AdamLrTOrder { lr_times_ratio, lr_sqrt_then_divide };  // RMSprop's mean square at step 0 (TF1: ones)
// ReduceLROnPlateau: PyTorch (improvement relative by default, reduce once the bad epochs exceed
// the patience, cooldown epochs not counted) or Keras (improvement absolute (min_delta), reduce
// once the waiting epochs reach the patience, the epoch that ends a cooldown counted).
enum class PlateauRule { torch, keras };
// How the model zoo writes the padding of its 'same'-sized convolutions (the CIFAR ResNets'
// and VGG-16's 3x3): as the frameworks' reference model code writes them.
enum class ModelConvPadding {
  same,      // Keras examples: Conv2D(padding='same'), resolved by conv_same_pad
  explicit_half,  // PyTorch reference models: nn.Conv2d(padding=k//2) (PyTorch refuses strided 'same')
};
// What an LSTM/GRU does at a padded step (a step the layer before marks as padding).
enum class RnnMask { none, carry, zero };

// --- int8 post-training quantization (quant/: resolved by quant/scheme.h into explicit op numbers) ---
// The toolchain a quant group was set from (quant_scheme=NAME sets every quant_* knob below).
enum class QuantToolchain { tflite, torch_qnnpack, torch_onednn, torch_fbgemm, ort };
enum class QuantActDtype { int8, uint8 };
enum class QuantActRange { full, reduced };      // PyTorch reduce_range: uint8 [0,127], int8 [-64,63]
enum class QuantWeightRange { full, narrow };    // [-128,127] (PyTorch) vs [-127,127] (TFLite, ORT symmetric)
enum class QuantGranularity { per_tensor, per_channel };
enum class QuantObserver { minmax, moving_average, histogram, percentile, entropy };  // quant/observer.h
// How a weight becomes an integer: w / s (ORT), w * (1/s) (PyTorch), w * (qmax_sym/amax) (TFLite).
enum class WeightScaleOp { divide, mul_reciprocal, mul_inverse_range };
// The zero point: qmin - round(min/s) (PyTorch _calculate_qparams) or round(qmin - min/s) (TFLite, ORT).
enum class ZeroPointForm { qmin_minus_round, round_of_difference };
// A floor on the scale: none (TFLite), max(s, float32 eps) (PyTorch), s < float32 tiny -> 1 (ORT).
enum class ScaleFloor { none, float32_eps, tiny_to_one };
// The bias: int32 round(double(b) / double(s_in*s_w)) (ORT), int32 round(b * (1/(s_in*s_w))) (TFLite,
// qnnpack), or a float added to the float accumulator inside the requantization (oneDNN, fbgemm).
enum class QuantBias { int32_divide_f64, int32_mul_reciprocal, float_in_requant };
// How the requantization multiplier M = s_in*s_w/s_out is formed: float32 (s_in*s_w)/s_out (fbgemm),
// float32 (s_w*s_in)*(1/s_out) (qnnpack), in double (TFLite), or from reciprocal scales as oneDNN takes
// them: bs = (1/s_in)*(1/s_w), M = (1/s_out)/bs (the float bias is then b*bs).
enum class QuantMultiplier { float32_divide, float32_mul_reciprocal, float64, reciprocal_scales };
// The residual add: qnnpack's fixed point, ATen's x86 float kernel (onednn, fbgemm engines), and
// TFLite's / ONNX Runtime's (named, not implemented yet: refused when a model has an add).
enum class QuantAdd { fixed_point_shift, float_fma_tail64, tflite_fixed_point, ort_qlinear_add };
// Global average pooling: PyTorch's round((sum - N*zp) * (1/N)) + zp; TFLite's and ORT's (not implemented yet).
enum class QuantAvgPool { float_reciprocal, tflite_integer_mean, tflite_rounded_division, ort_qlinear_global_avg_pool };
enum class QuantRelu { fused, separate };        // ReLU as the output clamp, or its own op on int8
// Dynamic-range (weights-only) quantization of dense and LSTM/GRU layers (quant/dynamic.h), resolved
// into core/ops/quant_dynamic.h's rules: how a layer's float input is quantized at each call (one
// uint8 scale/zero point in double (PyTorch) or float32 (ONNX DynamicQuantizeLinear), or symmetric
// int8 per row (TFLite hybrid)); how the float output is formed; whether an LSTM/GRU's input
// projection is quantized once over the whole sequence (PyTorch on CPU) or step by step.
enum class QuantDynAct { affine_double, affine_float, symmetric_per_row, affine_per_row };
// Weight scales of a dynamic layer: one per tensor (each of W_ih, W_hh, W), one per gate block of an
// LSTM/GRU weight (TFLite's fused LSTM: 8 scales; dense layers: per tensor), or one per output row.
enum class QuantDynWeights { per_tensor, per_gate, per_channel };
enum class QuantDynLayer { int8, float32 };  // a layer kind dynamic quantization converts, or leaves float
enum class QuantDynOutput { scale_then_bias, prescaled_bias };
enum class QuantDynInputProj { whole_sequence, per_step };

// CUDA execution (resolved into cuda::CudaExecParams by engine/cuda/device_net.cpp).
enum class Autocast { off, bfloat16, float16 };  // torch.autocast's op classes in a 16-bit format
enum class LossScale { none, fixed, dynamic };   // knob values none | static | dynamic (GradScaler / LossScaleOptimizer)
enum class SkippedStep { idle, counted };        // a skipped step: optimizer untouched | its step count advances (Keras)
enum class BiasRounding { once, twice };         // a 16-bit op's bias: added before the result's rounding | after it
// A 16-bit dense layer's sums: every product summed in float32 and rounded once | ATen's own CPU
// GEMM (the forward's x W^T a float32 dot product, the gradients' products summed in the format).
enum class MatmulSum { float32, per_term };
// A recurrent layer under autocast: its own ops under the lists, the state float32 (PyTorch on the
// CPU) | the whole layer one op in the format, states included (cuDNN's RNN, Keras: not built).
enum class RnnAutocastRule { ops, layer };
// Which layers cast their floating inputs to autocast's format: only the ops on its lists
// (torch.autocast: a value before the first such op stays float32) | every layer (a Keras mixed
// policy's Layer.__call__ casts its inputs to the compute dtype: the model's input is cast by its
// first layer, whatever its kind).
enum class AutocastInputCast { listed_ops, every_layer };
enum class CudaKernels { own, vendor };          // driftlab's CUDA kernels | cuBLAS + cuDNN
enum class AlgoSearch { heuristic, exhaustive };  // cuDNN algorithm choice
// cuDNN's RNN algorithm: always CUDNN_RNN_ALGO_STANDARD (TensorFlow), or PyTorch's get_algo rule
// (persistent small-hidden kernels where it picks them).
enum class RnnAlgoRule { standard, torch_heuristic };

struct Policy {
  std::string preset = "torch";  // the preset this policy started from (printing only)

  // --- layer semantics ---
  SamePad conv_same_pad = SamePad::half_strided;        // how 'same' splits odd padding
  bool conv_kernel_flip = false;                        // Theano conv2d filter_flip=True
  FlattenOrder flatten_order = FlattenOrder::chw;       // feature order after Flatten
  WeightLayout weight_layout = WeightLayout::oihw;      // order weights are drawn/exported in
  WeightInit init_weight = WeightInit::kaiming_uniform_sqrt5;  // conv/dense kernel init
  BiasInit init_bias = BiasInit::uniform_fan_in;        // conv/dense bias init
  EmbeddingInit embedding_init = EmbeddingInit::normal_1;  // nn.Embedding N(0,1); Keras U(+-0.05)
  ModelConvPadding model_conv_padding = ModelConvPadding::explicit_half;  // torchvision-style padding=1
  double relu_grad_at_zero = 0.0;                       // Theano relu=0.5(x+|x|) gives 0.5
  ReluNanGrad relu_grad_at_nan = ReluNanGrad::dy;       // torch threshold_backward passes dy at NaN
  PoolTies maxpool_grad_ties = PoolTies::first;         // Theano CPU MaxPoolGrad: all ties
  HardSigmoidKind hard_sigmoid_kind = HardSigmoidKind::relu6_div6;
  GradEdges hard_sigmoid_grad_edges = GradEdges::exclusive;
  // --- batch normalisation ---
  double bn_eps = 1e-5;                                 // torch 1e-5, Keras 1e-3, Lasagne 1e-4
  double bn_momentum = 0.9;                             // fraction of the running stat kept per step
  BnRunningVar bn_running_var = BnRunningVar::unbiased;
  bool bn_zero_debias = false;                          // TF assign_moving_average(zero_debias=True)
  // --- recurrent layers ---
  RnnWeightLayout rnn_weight_layout = RnnWeightLayout::gate_rows;  // torch weight_ih_l0 (G*u,in) row blocks
  GruGateOrder gru_gate_order = GruGateOrder::rzn;      // torch r,z,n; Keras z,r,h
  RnnNumBias rnn_num_bias = RnnNumBias::two;            // torch b_ih and b_hh; Keras one bias
  RnnGateAct rnn_recurrent_activation = RnnGateAct::sigmoid;  // Keras 2.2.4 hard_sigmoid
  RnnKernelInit rnn_kernel_init = RnnKernelInit::uniform_inv_sqrt_hidden;  // torch U(+-1/sqrt(u))
  RnnRecurrentInit rnn_recurrent_init = RnnRecurrentInit::uniform_inv_sqrt_hidden;  // Keras orthogonal
  RnnBiasInit rnn_bias_init = RnnBiasInit::uniform_inv_sqrt_hidden;  // Keras zeros
  LstmForgetBias lstm_forget_bias_init = LstmForgetBias::as_bias_init;  // Keras unit_forget_bias=True
  LstmPeepholes lstm_peepholes = LstmPeepholes::none;   // no preset (Lasagne's LSTMLayer default is on)
  GruReset gru_reset_after = GruReset::after;           // torch r*(W_hn h+b_hn); Keras 2.2.4 reset before
  GruUpdate gru_update_convention = GruUpdate::z_keeps_old;  // Lasagne: the update gate takes the new state
  RnnMask rnn_mask = RnnMask::none;                     // Keras Embedding(mask_zero=True): carry (default False: none)
  // --- loss ---
  CeFormulation ce_formulation = CeFormulation::log_softmax;
  double ce_clip_eps = 1e-7;                            // Keras backend.epsilon()
  LossReduction loss_reduction = LossReduction::mean;
  // --- optimiser ---
  SgdForm sgd_form = SgdForm::torch_buffer;
  WeightDecayMode weight_decay_mode = WeightDecayMode::grad_add;
  bool weight_decay_on_bias = true;
  AdamForm adam_form = AdamForm::corrected_moments;            // torch.optim.Adam: m/bc1, sqrt(v)/sqrt(bc2) + eps
  MomentUpdate optim_moment_update = MomentUpdate::weighted_sum;  // m = b*m + (1-b)*g (TF1 kernels: m += (g-m)*(1-b))
  SquareOrder optim_square_order = SquareOrder::scale_then_square;  // torch addcmul: ((1-b)*g)*g
  BetaPower adam_beta_power = BetaPower::pow_float64;          // torch: beta ** step in Python
  ScalarPrecision optim_scalar_precision = ScalarPrecision::float64;  // torch: Python doubles
  double adam_eps = 1e-8;                                      // torch.optim.Adam eps
  RmspropForm rmsprop_form = RmspropForm::eps_outside_root;    // torch: sqrt(v) + eps
  double rmsprop_rho = 0.99;                                   // torch.optim.RMSprop alpha
  double rmsprop_eps = 1e-8;                                   // torch.optim.RMSprop eps
  RmspropInit rmsprop_ms_init = RmspropInit::zeros;            // torch: zeros_like
  PlateauRule plateau_rule = PlateauRule::torch;
  OptimFma optim_fma = OptimFma::aten;                         // torch: add_(alpha)/addcmul_ as fma
  AdamLrTOrder adam_lr_t_order = AdamLrTOrder::lr_times_ratio; // Keras's grouping (epsilon_hat only)               // torch.optim.lr_scheduler.ReduceLROnPlateau
  // --- int8 quantization (defaults: torch_qnnpack, PyTorch Mobile's engine; apply_quant_toolchain) ---
  QuantToolchain quant_scheme = QuantToolchain::torch_qnnpack;
  QuantActDtype quant_act_dtype = QuantActDtype::uint8;          // torch quint8 activations
  QuantActRange quant_act_range = QuantActRange::full;           // qnnpack qconfig reduce_range=False
  QuantObserver quant_observer = QuantObserver::histogram;       // get_default_qconfig: HistogramObserver
  QuantWeightRange quant_weight_range = QuantWeightRange::full;  // qint8 [-128,127], scale amax/127.5
  QuantGranularity quant_conv_weights = QuantGranularity::per_tensor;   // qnnpack: per-tensor weights
  QuantGranularity quant_dense_weights = QuantGranularity::per_tensor;
  WeightScaleOp quant_weight_scale_op = WeightScaleOp::mul_reciprocal;  // ATen quantize_val: x * (1/s)
  ScaleOp quant_act_scale_op = ScaleOp::mul_reciprocal;
  RoundRule quant_round = RoundRule::half_even;                  // nearbyint
  RoundRule quant_zp_round = RoundRule::half_even;               // torch.round
  ZeroPointForm quant_zp_form = ZeroPointForm::qmin_minus_round;
  FloatType quant_scale_precision = FloatType::float32;          // float32 tensor math
  ScaleFloor quant_scale_floor = ScaleFloor::float32_eps;
  QuantBias quant_bias = QuantBias::int32_mul_reciprocal;
  FloatType quant_bias_product = FloatType::float64;            // q_scale() * act_scale: Python/C++ doubles
  RequantRule quant_requant = RequantRule::float_multiply;
  QuantMultiplier quant_multiplier = QuantMultiplier::float32_mul_reciprocal;  // generate_requantization_scales
  QuantRelu quant_relu = QuantRelu::fused;                       // fuse_modules: ConvReLU2d, LinearReLU
  DotRule quant_u8s8_dot = DotRule::exact;                       // VNNI / ARM: the integer sum
  // dynamic (weights-only) quantization, PyTorch quantize_dynamic on qnnpack (default_dynamic_qconfig)
  QuantDynAct quant_dyn_act = QuantDynAct::affine_double;        // ChooseQuantizationParams per call
  QuantActRange quant_dyn_range = QuantActRange::full;           // qnnpack ignores reduce_range=True
  QuantDynWeights quant_dyn_weights = QuantDynWeights::per_tensor;  // default_weight_observer
  QuantDynOutput quant_dyn_output = QuantDynOutput::scale_then_bias;  // qnnpack dq: acc*(s_in*s_w) + b
  QuantDynInputProj quant_dyn_input_proj = QuantDynInputProj::whole_sequence;  // RNN.cpp FullLayer (CPU)
  QuantDynLayer quant_dyn_gru = QuantDynLayer::int8;            // quantize_dynamic converts nn.GRU
  QuantAdd quant_add = QuantAdd::fixed_point_shift;              // pytorch_qnnp add
  QuantAvgPool quant_avg_pool = QuantAvgPool::float_reciprocal;  // adaptive_avg_pool2d (channels-last)
  // --- randomness ---
  RngEngine rng_engine = RngEngine::mt19937_u24;
  ShuffleAlgo shuffle = ShuffleAlgo::forward_modulo;
  // --- numerics: which CPU kernel runs each op family (core/ops/registry.h) ---
  KernelBackend conv_backend = KernelBackend::onednn;   // reference | eigen | onednn
  // direct | winograd (oneDNN's Winograd primitives where it has one; core/ops/conv2d.h). Every
  // preset: direct (no framework's CPU convolution runs Winograd).
  ConvAlgorithm conv_algorithm = ConvAlgorithm::direct;
  KernelBackend gemm_backend = KernelBackend::onednn;   // dense layers: reference | eigen | onednn
  // conv -> activation -> max pool run as one per-image op (fast) or as the three layers with
  // their own kernels (reference); core/ops/conv_block.h
  KernelBackend conv_block_backend = KernelBackend::fast;
  KernelBackend rnn_backend = KernelBackend::fast;      // LSTM/GRU: reference | fast
  KernelBackend bn_backend = KernelBackend::fast;       // BatchNorm: reference | fast
  KernelBackend pool_backend = KernelBackend::fast;     // max/average/global pooling: reference | fast
  KernelBackend act_backend = KernelBackend::fast;      // activations: reference | fast
  KernelBackend loss_backend = KernelBackend::fast;     // softmax cross-entropy: reference | fast
  KernelBackend sgd_backend = KernelBackend::fast;      // the SGD step: reference | fast
  KernelBackend quant_backend = KernelBackend::fast;    // int8 conv/dense/pool/quantize: reference | fast | onednn
  SumOrder acc_order = SumOrder::ascending;               // reference kernels only
  FloatType dtype = FloatType::float32;
  // Reduced-precision math of float32 convolutions and dense layers, emulated on the CPU
  // (engine/layers/math_mode.h): every CPU preset computes in float32.
  MathMode math_conv = MathMode::float32;    // float32 | tf32 | bfloat16 | float16
  MathMode math_matmul = MathMode::float32;  // dense layers' matmuls, the same values
  MathMode math_rnn = MathMode::float32;     // LSTM / GRU gate products: float32 | tf32
  Rounding tf32_rounding = Rounding::nearest_even;  // how an operand becomes TF32 (cuBLAS: nearest_even)
  // Under a bfloat16 / float16 mode, where the bias enters: once (added to the float32 accumulator,
  // the sum rounded once: oneDNN's conv and linear with bias, cuBLAS addmm) or twice (the product
  // rounded, then the bias added in the format: PyTorch's cuDNN conv then add_, Keras's bias_add).
  BiasRounding conv_bias_rounding = BiasRounding::once;
  BiasRounding matmul_bias_rounding = BiasRounding::once;
  // Under a bfloat16 / float16 mode, how a dense layer's GEMMs sum their products (MatmulSum;
  // engine/layers/math_mode.h apply_term_sums): float32 (oneDNN, cuBLAS) or per_term (ATen's own GEMM).
  MatmulSum matmul_sum = MatmulSum::float32;
  // Autocast emulated on the CPU (engine/layers/math_mode.h): convolutions and dense layers in the
  // format, the other layers in their input's format, the loss in float32. Every preset: off.
  Autocast autocast = Autocast::off;
  // A recurrent layer under autocast (core/ops/rnn.h, RnnParams::autocast): `ops` = PyTorch's CPU
  // autocast inside nn.LSTM / nn.GRU (gate products, sums and activations in the format, the cell
  // state and output float32); `layer` = the whole layer in the format (refused: not built). The
  // input projection's bias under `ops`: once inside the product's sum (a time-major input, one
  // addmm) or twice (batch_first=True: matmul, then a bfloat16 add), rnn_input_bias_rounding.
  RnnAutocastRule rnn_autocast_rule = RnnAutocastRule::ops;
  // Under autocast, whether the model's input is cast to the format before its first layer
  // (every_layer: Keras) or only where an op on autocast's lists takes it (listed_ops: PyTorch).
  AutocastInputCast autocast_input_cast = AutocastInputCast::listed_ops;
  BiasRounding rnn_input_bias_rounding = BiasRounding::twice;
  // Loss scaling of mixed-precision training (core/ops/loss_scale.h; the CPU runner): the loss
  // gradient times the scale, the parameter gradients divided by it, a step with an inf or NaN
  // gradient skipped and the scale backed off (dynamic; static: a fixed scale, nothing skipped).
  // Every preset: none.
  LossScale loss_scale = LossScale::none;
  double loss_scale_init = 65536;            // GradScaler's init_scale 2^16 (Keras: 2^15)
  double loss_scale_growth_interval = 2000;  // finite steps before the scale doubles (both)
  double loss_scale_min = 0;                 // the backoff's floor (GradScaler: none; Keras: 1)
  SkippedStep loss_scale_skipped_step = SkippedStep::idle;  // GradScaler: idle; Keras: counted
  // --- CUDA (--device cuda) ---
  CudaKernels cuda_kernels = CudaKernels::vendor;   // frameworks call cuBLAS/cuDNN
  bool tf32_matmul = false;                         // torch.backends.cuda.matmul.allow_tf32 (False since 1.12)
  bool tf32_conv = true;                            // torch.backends.cudnn.allow_tf32 (True)
  bool cuda_deterministic = false;                  // torch.backends.cudnn.deterministic / TF_DETERMINISTIC_OPS
  AlgoSearch cudnn_algo_search = AlgoSearch::heuristic;  // torch.backends.cudnn.benchmark=False
  RnnAlgoRule cudnn_rnn_algo = RnnAlgoRule::torch_heuristic;  // aten/src/ATen/native/cudnn/RNN.cpp get_algo

  static Policy tensorflow();
  static Policy theano();
  static Policy torch();
  static Policy preset_named(const std::string& name);  // throws on an unknown preset

  // "torch,conv_backend=reference,relu_grad_at_zero=0.5"; throws naming the bad knob/value.
  static Policy parse(const std::string& spec);
  // Canonical form: the preset followed by every knob that differs from it.
  std::string to_string() const;
  // Every knob as name=value (for model files and reports).
  std::string to_full_string() const;

  std::string get(const std::string& knob) const;
  void set(const std::string& knob, const std::string& value);
};

// Sets every quant_* knob to the toolchain's values (docs/POLICIES.md, quant group).
void apply_quant_toolchain(Policy& p, QuantToolchain t);

// Every CPU kernel knob (conv_backend ... sgd_backend) set to the reference: the all-reference
// engine that tests and `explain` compare against.
void use_reference_kernels(Policy& p);

struct KnobInfo {
  std::string name;
  std::string group;
  std::vector<std::string> values;  // empty for numeric knobs
  std::string what;                 // one line: what it changes
  std::string tensorflow, theano, torch;  // the framework behaviour each preset copies
  std::string source;               // where the framework defines it
};
const std::vector<KnobInfo>& knob_table();
const KnobInfo& knob_info(const std::string& name);  // throws listing the known knobs

struct KnobDiff {
  std::string knob, a, b;
};
std::vector<KnobDiff> diff(const Policy& a, const Policy& b);

}  // namespace driftlab
