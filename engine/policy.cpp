#include "engine/policy.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iomanip>
#include <set>
#include <sstream>

#include "core/error.h"

namespace driftlab {

namespace {

struct Accessor {
  std::function<std::string(const Policy&)> get;
  std::function<void(Policy&, const std::string&)> set;
};

std::string format_double(double v) {
  std::ostringstream os;
  os << std::setprecision(17) << v;
  // Shortest form that round-trips: try increasing precision.
  for (int prec = 1; prec <= 17; ++prec) {
    std::ostringstream t;
    t << std::setprecision(prec) << v;
    if (std::strtod(t.str().c_str(), nullptr) == v) {
      // Exponents without padding or '+': 1e-7, not 1e-07 (the spelling the docs use).
      std::string r = t.str();
      std::size_t e = r.find('e');
      if (e != std::string::npos) {
        std::string sign = r[e + 1] == '-' ? "-" : "";
        std::size_t d = e + 1 + (r[e + 1] == '-' || r[e + 1] == '+');
        while (d + 1 < r.size() && r[d] == '0') ++d;
        r = r.substr(0, e) + "e" + sign + r.substr(d);
      }
      return r;
    }
  }
  return os.str();
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

template <typename E>
Accessor enum_accessor(E Policy::*field, std::string name, std::vector<std::string> values) {
  Accessor a;
  a.get = [field, values](const Policy& p) { return values.at(static_cast<std::size_t>(p.*field)); };
  a.set = [field, values, name](Policy& p, const std::string& v) {
    auto it = std::find(values.begin(), values.end(), v);
    check(it != values.end(), "policy: knob '", name, "' has no value '", v, "' (allowed: ",
          join(values, ", "), ")");
    p.*field = static_cast<E>(it - values.begin());
  };
  return a;
}

Accessor bool_accessor(bool Policy::*field, std::string name) {
  return {[field](const Policy& p) { return std::string(p.*field ? "true" : "false"); },
          [field, name](Policy& p, const std::string& v) {
            check(v == "true" || v == "false", "policy: knob '", name, "' has no value '", v,
                  "' (allowed: true, false)");
            p.*field = v == "true";
          }};
}

Accessor double_accessor(double Policy::*field, std::string name, double lo, double hi) {
  return {[field](const Policy& p) { return format_double(p.*field); },
          [field, name, lo, hi](Policy& p, const std::string& v) {
            char* end = nullptr;
            double d = std::strtod(v.c_str(), &end);
            check(!v.empty() && end && *end == '\0', "policy: knob '", name, "' needs a number, got '",
                  v, "'");
            check(d >= lo && d <= hi, "policy: knob '", name, "'=", v, " is outside [",
                  format_double(lo), ", ", format_double(hi), "]");
            p.*field = d;
          }};
}

// A CPU kernel knob: its values are backend names (a subset of KernelBackend).
Accessor backend_accessor(KernelBackend Policy::*field, std::string name, std::vector<std::string> values) {
  return {[field](const Policy& p) { return std::string(backend_name(p.*field)); },
          [field, name, values](Policy& p, const std::string& v) {
            check(std::find(values.begin(), values.end(), v) != values.end(), "policy: knob '", name,
                  "' has no value '", v, "' (allowed: ", join(values, ", "), ")");
            p.*field = backend_from_name(v);
          }};
}

struct KnobRow {
  KnobInfo info;
  Accessor access;
};

KnobRow backend_knob(KernelBackend Policy::*field, KnobInfo info) {
  return {info, backend_accessor(field, info.name, info.values)};
}

template <typename E>
KnobRow enum_knob(E Policy::*field, KnobInfo info) {
  return {info, enum_accessor(field, info.name, info.values)};
}

const std::vector<KnobRow>& rows() {
  static const std::vector<KnobRow> kRows = [] {
    std::vector<KnobRow> r;
    const std::string kK = "keras/backend/tensorflow_backend.py@2.2.4";
    r.push_back(enum_knob(&Policy::conv_same_pad,
        {"conv_same_pad", "layers", {"after", "before", "after_stride1", "half_strided"},
         "'same' padding: which side gets the extra pad when the total is odd; strided 'same' allowed?",
         "after: before=floor(P/2), extra bottom/right", "before: half pad then crop to ceil(n/s), extra top/left",
         "half_strided: stride 1 as padding='same' (extra right); stride>1, which PyTorch refuses "
         "(after_stride1), padding=(dk-1)/2 every side as PyTorch code writes it",
         "tensorflow/core/framework/kernel_shape_util.cc GetWindowedOutputSizeVerbose; "
         "keras/backend/theano_backend.py@2.2.4 _preprocess_padding; torch/nn/modules/conv.py; "
         "torchvision/models/resnet.py conv3x3, torchvision/ops/misc.py ConvNormActivation"}));
    r.push_back({{"conv_kernel_flip", "layers", {"true", "false"},
                  "true convolution (kernel rotated 180 degrees) instead of cross-correlation",
                  "false (cross-correlation)", "true: T.nnet.conv2d filter_flip=True, Keras does not override it",
                  "false (cross-correlation)",
                  "theano/tensor/nnet/__init__.py conv2d; keras/backend/theano_backend.py@2.2.4 conv2d"},
                 bool_accessor(&Policy::conv_kernel_flip, "conv_kernel_flip")});
    r.push_back(enum_knob(&Policy::flatten_order,
        {"flatten_order", "layers", {"chw", "hwc"}, "feature order produced by Flatten",
         "hwc: channels_last flatten", "hwc: Keras >=2.1.6 permutes channels_first to channels_last",
         "chw: view(N,-1) of NCHW", "keras/layers/core.py@2.2.4 Flatten.call; torch/nn/modules/flatten.py"}));
    r.push_back(enum_knob(&Policy::weight_layout,
        {"weight_layout", "layers", {"oihw", "hwio"},
         "order in which conv/dense weights are drawn at init and written to .npy (conv OIHW vs HWIO, dense (out,in) vs (in,out))",
         "hwio: kernel (kh,kw,in,out), dense (in,out)", "hwio: Keras stores HWIO and dimshuffles",
         "oihw: weight (out,in,kh,kw), dense (out,in)",
         "keras/backend/theano_backend.py@2.2.4 _preprocess_conv2d_kernel; torch/nn/modules/conv.py"}));
    r.push_back(enum_knob(&Policy::init_weight,
        {"init_weight", "init", {"glorot_uniform", "kaiming_uniform_sqrt5"},
         "default conv/dense kernel initialiser",
         "glorot_uniform: U(+-sqrt(6/(fan_in+fan_out)))", "glorot_uniform (Keras)",
         "kaiming_uniform(a=sqrt 5): U(+-1/sqrt(fan_in))",
         "keras/initializers.py@2.2.4 VarianceScaling; torch/nn/modules/conv.py reset_parameters, torch/nn/init.py"}));
    r.push_back(enum_knob(&Policy::init_bias,
        {"init_bias", "init", {"zeros", "uniform_fan_in"}, "default conv/dense bias initialiser",
         "zeros", "zeros", "U(+-1/sqrt(fan_in))",
         "keras/layers/core.py@2.2.4 Dense; torch/nn/modules/linear.py reset_parameters"}));
    r.push_back(enum_knob(&Policy::embedding_init,
        {"embedding_init", "init", {"uniform_0p05", "normal_1"}, "embedding table initialiser",
         "uniform_0p05: Embedding(embeddings_initializer='uniform') = RandomUniform(-0.05, 0.05)",
         "uniform_0p05 (the same Keras layer)", "normal_1: nn.Embedding reset_parameters init.normal_, N(0,1)",
         "keras/layers/embeddings.py@2.2.4 Embedding.__init__; keras/initializers.py@2.2.4 RandomUniform; "
         "torch/nn/modules/sparse.py Embedding.reset_parameters"}));
    r.push_back(enum_knob(&Policy::model_conv_padding,
        {"model_conv_padding", "layers", {"same", "explicit_half"},
         "how the model zoo pads its size-keeping convolutions (CIFAR ResNets, VGG-16): 'same' (then conv_same_pad "
         "decides the split) or explicit k//2 on every side",
         "same: Keras model code writes Conv2D(..., padding='same')", "same (the same Keras model code)",
         "explicit_half: nn.Conv2d(..., padding=1), as PyTorch's CIFAR ResNet and torchvision VGG write it",
         "keras/applications/resnet50.py@2.2.4, keras-team/keras examples/cifar10_resnet.py (padding='same'); "
         "torchvision/models/vgg.py, torchvision/models/resnet.py conv3x3 (padding=1)"}));
    r.push_back({{"relu_grad_at_zero", "layers", {}, "value of dReLU/dx at exactly x=0",
                  "0: ReluGrad g*(x>0)", "0.5: relu=0.5(x+|x|) and d|x|/dx=sgn(0)=0", "0",
                  "tensorflow/core/kernels/relu_op_functor.h; theano/tensor/nnet/nnet.py relu"},
                 double_accessor(&Policy::relu_grad_at_zero, "relu_grad_at_zero", 0.0, 1.0)});
    r.push_back(enum_knob(&Policy::relu_grad_at_nan,
        {"relu_grad_at_nan", "layers", {"dy", "nan"}, "value of dReLU/dx times dy at x=NaN (the forward gives NaN)",
         "nan: TF.js Relu grad dy*step(x), step(NaN)=NaN", "nan: 0.5*(dy+dy*sgn(x)), sgn(NaN)=NaN",
         "dy: threshold_backward(dy, y, 0) tests y<=0, false for NaN",
         "tfjs-core/src/gradients/Relu_grad.ts, tfjs-backend-cpu Step; theano/scalar/basic.py Sgn.c_code; "
         "aten/src/ATen/native/Activation.cpp threshold_backward"}));
    r.push_back(enum_knob(&Policy::maxpool_grad_ties,
        {"maxpool_grad_ties", "layers", {"first", "all"},
         "which inputs of a max-pool window receive the gradient when several equal the max",
         "first: the first max in row-major scan (CPU)", "all: every element equal to the max (MaxPoolGrad c_code)",
         "first: first index in scan order",
         "tensorflow/core/kernels/maxpooling_op.cc; theano/tensor/signal/pool.py MaxPoolGrad; aten DilatedMaxPool2d"}));
    r.push_back(enum_knob(&Policy::hard_sigmoid_kind,
        {"hard_sigmoid_kind", "layers", {"linear_0p2", "relu6_div6"}, "hard sigmoid formula",
         "linear_0p2: clip(0.2x+0.5,0,1)", "linear_0p2: T.nnet.hard_sigmoid",
         "relu6_div6: nn.Hardsigmoid min(max(x+3,0),6)/6 (shift, clamp, divide)",
         kK + " hard_sigmoid; theano/tensor/nnet/sigm.py; torch/nn/modules/activation.py"}));
    r.push_back(enum_knob(&Policy::hard_sigmoid_grad_edges,
        {"hard_sigmoid_grad_edges", "layers", {"inclusive", "exclusive"},
         "whether the hard-sigmoid slope applies at the clip points themselves",
         "inclusive: clip grad zeroes only x<min or x>max", "inclusive: Clip.L_op (x>=mn)&(x<=mx)",
         "exclusive: grad 0 at x=+-3",
         "tensorflow/python/ops/clip_ops.py; theano/scalar/basic.py Clip.L_op; torch hardsigmoid_backward"}));
    r.push_back({{"bn_eps", "batchnorm", {}, "epsilon added to the variance in BatchNorm",
                  "1e-3 (Keras BatchNormalization default)", "1e-3 (same Keras layer)", "1e-5 (nn.BatchNorm2d)",
                  "keras/layers/normalization.py@2.2.4 L63-64; torch/nn/modules/batchnorm.py"},
                 double_accessor(&Policy::bn_eps, "bn_eps", 0.0, 1.0)});
    r.push_back({{"bn_momentum", "batchnorm", {}, "fraction of the running statistic kept at each step",
                  "0.99 (Keras momentum: r = 0.99 r + 0.01 b)", "0.99", "0.9 (torch momentum=0.1: r = 0.9 r + 0.1 b)",
                  "keras/layers/normalization.py@2.2.4; torch/nn/modules/batchnorm.py"},
                 double_accessor(&Policy::bn_momentum, "bn_momentum", 0.0, 1.0)});
    r.push_back(enum_knob(&Policy::bn_running_var,
        {"bn_running_var", "batchnorm", {"biased", "unbiased", "keras_tf", "keras_theano", "lasagne_inv_std"},
         "what is averaged into the running variance, from the biased batch variance v over n values",
         "keras_tf: v*n/(n-1-eps) for 2-D; 4-D goes through TF's fused kernel (already *n/(n-1)) first",
         "keras_theano: the backend returns v+eps, then *n/(n-1-eps)", "unbiased: v*n/(n-1)",
         "keras/layers/normalization.py@2.2.4 L188-193; tensorflow/core/kernels/fused_batch_norm_op.cc; "
         "keras/backend/theano_backend.py@2.2.4 L743-765; aten/src/ATen/native/Normalization.cpp"}));
    r.push_back({{"bn_zero_debias", "batchnorm", {"true", "false"},
                  "running statistics as TF's zero-debiased moving average (the first batch's statistic after step 1)",
                  "true: moving_average_update uses assign_moving_average(zero_debias=True) (Keras 2.1.3-2.2.5)",
                  "false: x*m + v*(1-m)", "false",
                  "keras/backend/tensorflow_backend.py@2.2.4 moving_average_update; "
                  "tensorflow/python/training/moving_averages.py _zero_debias"},
                 bool_accessor(&Policy::bn_zero_debias, "bn_zero_debias")});
    const std::string kR = "keras/layers/recurrent.py@2.2.4";
    const std::string kT = "torch/nn/modules/rnn.py";
    r.push_back(enum_knob(&Policy::rnn_weight_layout,
        {"rnn_weight_layout", "recurrent", {"gate_rows", "gate_cols"},
         "packed LSTM/GRU weight layout for init draw order and .npy export (the LSTM gate order i,f,c/g,o is the same in both)",
         "gate_cols: kernel (in,G*u), recurrent_kernel (u,G*u), gates as column blocks",
         "gate_cols (Keras layer code)", "gate_rows: weight_ih_l0 (G*u,in), weight_hh_l0 (G*u,u), gates as row blocks",
         kR + " LSTMCell.build L1894-1910; " + kT + " RNNBase"}));
    r.push_back(enum_knob(&Policy::gru_gate_order,
        {"gru_gate_order", "recurrent", {"rzn", "zrh"}, "order of the GRU gate blocks in the packed weights",
         "zrh: update, reset, candidate", "zrh (Keras layer code)", "rzn: reset, update, new",
         kR + " GRUCell.build L1304-1316; " + kT + " GRU docstring; keras#8720"}));
    r.push_back(enum_knob(&Policy::rnn_num_bias,
        {"rnn_num_bias", "recurrent", {"1", "2"},
         "bias vectors per LSTM/GRU layer: one, or input b_ih and recurrent b_hh (b_hn sits inside r* when the GRU resets after)",
         "1: bias (G*u)", "1 (Keras layer code)", "2: bias_ih_l0 and bias_hh_l0, summed (GRU: b_hn inside r*)",
         kR + " L1289, L1902; " + kT + " RNNBase._flat_weights"}));
    r.push_back(enum_knob(&Policy::rnn_recurrent_activation,
        {"rnn_recurrent_activation", "recurrent", {"sigmoid", "hard_sigmoid"},
         "activation of the LSTM i,f,o and GRU r,z gates (hard_sigmoid follows hard_sigmoid_kind and _grad_edges)",
         "hard_sigmoid (Keras <=2.2.5 default; sigmoid from 2.3.0 and TF2)", "hard_sigmoid (T.nnet.hard_sigmoid)",
         "sigmoid (fixed)", kR + " L1819 (LSTMCell), L1252 (GRUCell); tensorflow#47495"}));
    r.push_back(enum_knob(&Policy::rnn_kernel_init,
        {"rnn_kernel_init", "init", {"glorot_uniform", "uniform_inv_sqrt_hidden"},
         "initialiser of the LSTM/GRU input kernel",
         "glorot_uniform over (in, G*u): U(+-sqrt(6/(in+G*u)))", "glorot_uniform (Keras)",
         "uniform_inv_sqrt_hidden: U(+-1/sqrt(u)) for every parameter", kR + " L1878; " + kT + " reset_parameters"}));
    r.push_back(enum_knob(&Policy::rnn_recurrent_init,
        {"rnn_recurrent_init", "init", {"orthogonal", "uniform_inv_sqrt_hidden"},
         "initialiser of the LSTM/GRU recurrent kernel",
         "orthogonal: (u,G*u) with orthonormal rows, from a Gaussian", "orthogonal (Keras)",
         "uniform_inv_sqrt_hidden: U(+-1/sqrt(u))", "keras/initializers.py@2.2.4 Orthogonal; " + kT + " reset_parameters"}));
    r.push_back(enum_knob(&Policy::rnn_bias_init,
        {"rnn_bias_init", "init", {"zeros", "uniform_inv_sqrt_hidden"}, "initialiser of the LSTM/GRU biases",
         "zeros", "zeros (Keras)", "uniform_inv_sqrt_hidden: U(+-1/sqrt(u)), both vectors",
         kR + " L1870-1885; " + kT + " reset_parameters"}));
    r.push_back(enum_knob(&Policy::lstm_forget_bias_init,
        {"lstm_forget_bias_init", "init", {"one", "as_bias_init"},
         "LSTM forget-gate bias at init: 1 (stored, not drawn), or drawn like the other biases",
         "one: unit_forget_bias=True", "one (Keras)", "as_bias_init: U(+-1/sqrt(u)) like every bias",
         kR + " L1876-1882; " + kT + " reset_parameters"}));
    r.push_back(enum_knob(&Policy::lstm_peepholes,
        {"lstm_peepholes", "recurrent", {"none", "lasagne"},
         "LSTM diagonal cell-to-gate connections: none, or Lasagne's (i and f see c_{t-1}, o sees the new c; "
         "three (units,) weights drawn N(0, 0.1^2))",
         "none (keras.layers.LSTM has none)", "none (Keras layer code)", "none (nn.LSTM has none)",
         "lasagne/layers/recurrent.py@0.2 LSTMLayer step (peepholes=True: ingate += cell_previous*W_cell_to_ingate, "
         "outgate += cell*W_cell_to_outgate), Gate(W_cell=init.Normal(0.1)); " + kR + " LSTMCell"}));
    r.push_back(enum_knob(&Policy::gru_reset_after,
        {"gru_reset_after", "recurrent", {"before", "after"},
         "GRU reset gate applied to h before the recurrent matmul, or to (W_hn h [+ b_hn]) after it (with 1 bias: Lasagne)",
         "before: tanh(W_h x + b_h + U_h(r*h)) (reset_after=False)", "before (Keras layer code)",
         "after: tanh(W_in x + b_in + r*(W_hn h + b_hn))",
         kR + " L1238, L1396-1403; " + kT + " GRU; lasagne/layers/recurrent.py L1416-1430"}));
    r.push_back(enum_knob(&Policy::gru_update_convention,
        {"gru_update_convention", "recurrent", {"z_keeps_old", "z_takes_new"},
         "GRU update gate role: h' = z*h + (1-z)*n, or (1-z)*h + z*n (Lasagne)",
         "z_keeps_old: h = z*h_tm1 + (1-z)*hh", "z_keeps_old (Keras layer code)", "z_keeps_old: (1-z)*n + z*h",
         kR + " GRUCell.call; " + kT + " GRU; lasagne/layers/recurrent.py GRULayer"}));
    r.push_back(enum_knob(&Policy::rnn_mask,
        {"rnn_mask", "recurrent", {"none", "carry", "zero"},
         "LSTM/GRU at padded steps (token id 0 of an embedding): computed like data; state and output carried "
         "from t-1; or state carried and output 0 (the last-step output is the final state either way)",
         "none: Embedding(mask_zero=False), the Keras 2.2.4 default (examples/imdb_lstm.py); carry = mask_zero=True",
         "none (same Keras layers); carry = mask_zero=True (T.switch in K.rnn), Lasagne mask_input",
         "none: nn.LSTM/GRU on the padded tensor; pack_padded_sequence's h_n = carry's last step",
         "keras/layers/embeddings.py@2.2.4 mask_zero; " + kK + " rnn (tf.where); "
         "keras/backend/theano_backend.py@2.2.4 rnn L1502-1536; tensorflow/python/keras/layers/recurrent_v2.py "
         "gpu_lstm/gpu_gru (zero): tf_keras/layers/rnn/gru.py L1109-1118; torch/nn/utils/rnn.py pack_padded_sequence"}));
    r.push_back(enum_knob(&Policy::ce_formulation,
        {"ce_formulation", "loss", {"log_softmax", "softmax_clip", "softmax_log"},
         "how softmax cross-entropy is formed from the logits",
         "softmax_clip: q=clip(p/sum p, eps, 1-eps), L=-sum t log q", "softmax_clip (Keras clips on Theano too)",
         "log_softmax: nll(log_softmax(z))",
         kK + " categorical_crossentropy; keras/backend/theano_backend.py@2.2.4; torch/nn/functional.py cross_entropy"}));
    r.push_back({{"ce_clip_eps", "loss", {}, "epsilon of the softmax_clip formulation",
                  "1e-7 (backend.epsilon())", "1e-7", "unused (no clip)", "keras/backend/common.py@2.2.4 _EPSILON"},
                 double_accessor(&Policy::ce_clip_eps, "ce_clip_eps", 0.0, 0.5)});
    r.push_back(enum_knob(&Policy::loss_reduction,
        {"loss_reduction", "loss", {"mean", "sum"}, "reduction of per-sample losses over the batch",
         "mean", "mean", "mean (reduction='mean')", "keras/engine/training_utils.py@2.2.4; torch/nn/modules/loss.py"}));
    r.push_back(enum_knob(&Policy::sgd_form,
        {"sgd_form", "optimiser", {"torch_buffer", "keras_velocity", "lasagne_difference"},
         "SGD momentum/Nesterov update formula",
         "keras_velocity: v=mu*v-lr*g; p+=v (Nesterov p+=mu*v-lr*g)", "keras_velocity (Keras SGD)",
         "torch_buffer: b=mu*b+g (b=g at step 1); p-=lr*b (Nesterov p-=lr*(g+mu*b))",
         "keras/optimizers.py@2.2.4 SGD.get_updates; torch/optim/sgd.py; lasagne/updates.py apply_momentum"}));
    r.push_back(enum_knob(&Policy::weight_decay_mode,
        {"weight_decay_mode", "optimiser", {"grad_add", "l2_loss", "decoupled", "decoupled_scale"},
         "where weight decay D enters: g+=D*p, loss+=D*sum(w^2) (g+=2D*w), p-=lr*D*p, or p*=(1-lr*D) "
         "(Adam/RMSprop)",
         "l2_loss: kernel_regularizer=l2(D)", "l2_loss", "grad_add: weight_decay=D (AdamW: decoupled_scale)",
         "keras/regularizers.py@2.2.4; torch/optim/sgd.py, adam.py, adamw.py; tf_keras/optimizers/optimizer.py"}));
    r.push_back({{"weight_decay_on_bias", "optimiser", {"true", "false"}, "whether weight decay also applies to biases",
                  "false: regularizer on kernels only", "false", "true: every parameter in the group",
                  "keras/layers/core.py@2.2.4; torch/optim/sgd.py"},
                 bool_accessor(&Policy::weight_decay_on_bias, "weight_decay_on_bias")});
    const std::string kOpt = "keras/optimizers.py@2.2.4";
    r.push_back(enum_knob(&Policy::adam_form,
        {"adam_form", "optimiser", {"corrected_moments", "corrected_quotient", "epsilon_hat"},
         "Adam's update: p += -(lr/bc1)*m/(sqrt(v)/sqrt(bc2)+eps); p += ((m/bc1)/(sqrt(v/bc2)+eps))*(-lr) "
         "(TF.js); or p -= lr_t*m/(sqrt(v)+eps) with lr_t = lr*sqrt(bc2)/bc1 (bc = 1-beta^t)",
         "epsilon_hat: Adam.get_updates lr_t", "epsilon_hat (Keras; Lasagne adam too)",
         "corrected_moments: _single_tensor_adam",
         kOpt + " Adam; torch/optim/adam.py _single_tensor_adam; tfjs-core/src/optimizers/adam_optimizer.ts; "
         "lasagne/updates.py adam; tensorflow/core/kernels/training_ops.cc ApplyAdamNonCuda"}));
    r.push_back(enum_knob(&Policy::optim_moment_update,
        {"optim_moment_update", "optimiser", {"weighted_sum", "increment"},
         "Adam/RMSprop moving averages: m = b*m + (1-b)*g, or m += (g-m)*(1-b) (TF1's ApplyAdam/ApplyRMSProp)",
         "weighted_sum (Keras graph)", "weighted_sum", "weighted_sum: mul_(b).add_(g, alpha=1-b)",
         kOpt + "; torch/optim/adam.py; tensorflow/core/kernels/training_ops.cc"}));
    r.push_back(enum_knob(&Policy::optim_square_order,
        {"optim_square_order", "optimiser", {"scale_then_square", "square_then_scale"},
         "the new term of the second moment: ((1-b)*g)*g (addcmul) or (1-b)*(g*g)",
         "square_then_scale: (1-beta_2)*K.square(g)", "square_then_scale", "scale_then_square: addcmul_(g, g, value=1-b)",
         kOpt + "; torch/optim/adam.py, rmsprop.py"}));
    r.push_back(enum_knob(&Policy::adam_beta_power,
        {"adam_beta_power", "optimiser", {"pow_float64", "pow_float32", "product_float32"},
         "how Adam forms beta^t: pow in double, pow in float32, or a float32 running product (TF1, TF.js)",
         "pow_float32: K.pow(beta_2, t) on float32 variables", "pow_float32", "pow_float64: beta1 ** step (Python)",
         kOpt + "; torch/optim/adam.py; tensorflow/python/training/adam.py _finish; tfjs adam_optimizer.ts accBeta1"}));
    r.push_back(enum_knob(&Policy::optim_scalar_precision,
        {"optim_scalar_precision", "optimiser", {"float64", "float32"},
         "precision of the optimiser's per-step scalars (1-beta, bias corrections, step size, decayed rate)",
         "float32: graph tensors", "float32", "float64: Python numbers",
         kOpt + "; torch/optim/adam.py"}));
    r.push_back({{"adam_eps", "optimiser", {}, "Adam's epsilon (a framework default)", "1e-7 (K.epsilon())", "1e-7",
                  "1e-8", kOpt + " Adam.__init__; torch/optim/adam.py; lasagne/updates.py adam (1e-8)"},
                 double_accessor(&Policy::adam_eps, "adam_eps", 0.0, 1.0)});
    r.push_back(enum_knob(&Policy::rmsprop_form,
        {"rmsprop_form", "optimiser", {"eps_outside_root", "eps_inside_root"},
         "RMSprop's denominator: sqrt(v)+eps, or sqrt(v+eps) with the rate inside the momentum term (TF1, TF.js)",
         "eps_outside_root: lr*g/(K.sqrt(new_a)+epsilon)", "eps_outside_root", "eps_outside_root: sqrt().add_(eps)",
         kOpt + " RMSprop; torch/optim/rmsprop.py; tensorflow/core/kernels/training_ops.cc ApplyRMSProp; "
         "tfjs-core/src/optimizers/rmsprop_optimizer.ts"}));
    r.push_back({{"rmsprop_rho", "optimiser", {}, "RMSprop's decay of the mean square (a framework default)",
                  "0.9 (rho)", "0.9", "0.99 (alpha)", kOpt + " RMSprop.__init__; torch/optim/rmsprop.py"},
                 double_accessor(&Policy::rmsprop_rho, "rmsprop_rho", 0.0, 0.999999)});
    r.push_back({{"rmsprop_eps", "optimiser", {}, "RMSprop's epsilon (a framework default)", "1e-7 (K.epsilon())",
                  "1e-7", "1e-8", kOpt + "; torch/optim/rmsprop.py; tensorflow/python/training/rmsprop.py (1e-10)"},
                 double_accessor(&Policy::rmsprop_eps, "rmsprop_eps", 0.0, 1.0)});
    r.push_back(enum_knob(&Policy::rmsprop_ms_init,
        {"rmsprop_ms_init", "optimiser", {"zeros", "ones"}, "RMSprop's mean square at the start",
         "zeros: K.zeros", "zeros", "zeros: zeros_like",
         kOpt + "; torch/optim/rmsprop.py; tensorflow/python/training/rmsprop.py _create_slots (ones)"}));
    r.push_back(enum_knob(&Policy::plateau_rule,
        {"plateau_rule", "optimiser", {"torch", "keras"},
         "ReduceLROnPlateau: relative threshold, reduce when bad epochs > patience (torch); absolute min_delta, "
         "reduce when wait >= patience, cooldown's last epoch counted (Keras)",
         "keras: callbacks.ReduceLROnPlateau", "keras", "torch: lr_scheduler.ReduceLROnPlateau",
         "keras/callbacks.py@2.2.4 ReduceLROnPlateau; torch/optim/lr_scheduler.py ReduceLROnPlateau"}));
    r.push_back(enum_knob(&Policy::optim_fma,
        {"optim_fma", "optimiser", {"none", "aten"},
         "the optimiser's multiply-adds: every operation rounded, or PyTorch's add(alpha)/addcmul as one fma "
         "(SGD: g+D*p, g+mu*b, p-lr*d; Adam/RMSprop: the weighted sums, g+D*p, RMSprop's p-lr*b)",
         "none (graph ops round each result)", "none", "aten: vectorised CPU kernels fuse add(alpha) and addcmul",
         "aten/src/ATen/native/ufunc/add.h (Vectorized add: fmadd); aten/src/ATen/native/cpu/PointwiseOpsKernel.cpp "
         "addcmul; torch/optim/sgd.py, adam.py, rmsprop.py"}));
    r.push_back(enum_knob(&Policy::adam_lr_t_order,
        {"adam_lr_t_order", "optimiser", {"lr_times_ratio", "lr_sqrt_then_divide"},
         "adam_form=epsilon_hat's step size: lr*(sqrt(1-b2^t)/(1-b1^t)) (Keras) or (lr*sqrt(1-b2^t))/(1-b1^t) "
         "(TF1's ApplyAdam, Lasagne)",
         "lr_times_ratio: lr * (K.sqrt(1. - K.pow(beta_2, t)) / (1. - K.pow(beta_1, t)))", "lr_times_ratio",
         "lr_times_ratio (unused: corrected_moments)",
         kOpt + " Adam.get_updates; tensorflow/core/kernels/training_ops.cc ApplyAdamNonCuda; lasagne/updates.py adam"}));
    // --- int8 quantization: docs/QUANT_SOURCES.md has every formula with its source ---
    const std::string kQ = "tensorflow/lite/tools/optimize/quantization_utils.cc; "
                           "torch/ao/quantization/observer.py + qconfig.py@1.13; "
                           "onnxruntime/python/tools/quantization/quant_utils.py";
    {
      KnobInfo info{"quant_scheme", "quant", {"tflite", "torch_qnnpack", "torch_onednn", "torch_fbgemm", "ort"},
                    "the int8 toolchain: setting it sets every quant_* knob to that toolchain's values (give it "
                    "before any quant_* knob)",
                    "tflite (TFLite converter, legacy quantizer)", "tflite (no Theano int8 toolchain)",
                    "torch_qnnpack (PyTorch Mobile's engine)", kQ};
      Accessor a = enum_accessor(&Policy::quant_scheme, info.name, info.values);
      auto plain_set = a.set;
      a.set = [plain_set](Policy& p, const std::string& v) {
        plain_set(p, v);
        apply_quant_toolchain(p, p.quant_scheme);
      };
      r.push_back({info, a});
    }
    r.push_back(enum_knob(&Policy::quant_act_dtype,
        {"quant_act_dtype", "quant", {"int8", "uint8"}, "integer type of activations",
         "int8", "int8", "uint8 (quint8)", kQ}));
    r.push_back(enum_knob(&Policy::quant_act_range,
        {"quant_act_range", "quant", {"full", "reduced"},
         "range an activation's scale is computed for: the type's, or PyTorch reduce_range's ([0,127] / [-64,63]); "
         "kernels still clamp to the type",
         "full", "full", "full (qnnpack, onednn qconfigs; fbgemm: reduced)",
         "torch/ao/quantization/utils.py calculate_qmin_qmax; qconfig.py get_default_qconfig"}));
    r.push_back(enum_knob(&Policy::quant_observer,
        {"quant_observer", "quant", {"minmax", "moving_average", "histogram", "percentile", "entropy"},
         "calibration observer of activations (quant/observer.h)", "minmax (calibrator min/max)", "minmax",
         "histogram (HistogramObserver, L2 search)",
         "torch/ao/quantization/observer.py; onnxruntime/python/tools/quantization/calibrate.py"}));
    r.push_back(enum_knob(&Policy::quant_weight_range,
        {"quant_weight_range", "quant", {"full", "narrow"},
         "int8 weight range: [-128,127] or [-127,127]; the symmetric scale is 2*amax/(qmax-qmin) "
         "(amax/127.5 or amax/127)",
         "narrow (amax/127)", "narrow", "full (qint8, amax/127.5)", kQ}));
    r.push_back(enum_knob(&Policy::quant_conv_weights,
        {"quant_conv_weights", "quant", {"per_tensor", "per_channel"}, "convolution weight scale granularity",
         "per_channel", "per_channel", "per_tensor (qnnpack default_weight_observer)", kQ}));
    r.push_back(enum_knob(&Policy::quant_dense_weights,
        {"quant_dense_weights", "quant", {"per_tensor", "per_channel"}, "dense layer weight scale granularity",
         "per_tensor (fully_connected: per-tensor)", "per_tensor", "per_tensor (qnnpack)", kQ}));
    r.push_back(enum_knob(&Policy::quant_weight_scale_op,
        {"quant_weight_scale_op", "quant", {"divide", "mul_reciprocal", "mul_inverse_range"},
         "how a weight becomes an integer: w/s, w*(1/s), or w*(qmax_sym/amax)",
         "mul_inverse_range (SymmetricPerChannelQuantizeValues)", "mul_inverse_range",
         "mul_reciprocal (quantize_val: nearbyint(x * inv_scale))", kQ}));
    r.push_back(enum_knob(&Policy::quant_act_scale_op,
        {"quant_act_scale_op", "quant", {"divide", "mul_reciprocal"},
         "how an activation is quantized: x/s or x*(1/s) (1/s in float32)", "divide (reference_ops AffineQuantize)",
         "divide", "mul_reciprocal", kQ}));
    r.push_back(enum_knob(&Policy::quant_round,
        {"quant_round", "quant", {"half_away", "half_even"},
         "rounding of activations, weights and the int32 bias", "half_away (TfLiteRound = std::round)",
         "half_away", "half_even (nearbyint)", kQ}));
    r.push_back(enum_knob(&Policy::quant_zp_round,
        {"quant_zp_round", "quant", {"half_away", "half_even"}, "rounding of the activation zero point",
         "half_away (std::round)", "half_away", "half_even (torch.round)", kQ}));
    r.push_back(enum_knob(&Policy::quant_zp_form,
        {"quant_zp_form", "quant", {"qmin_minus_round", "round_of_difference"},
         "zero point as qmin - round(min/s) or round(qmin - min/s), then clamped to [qmin, qmax]",
         "round_of_difference (GetAsymmetricQuantizationParams)", "round_of_difference",
         "qmin_minus_round (_calculate_qparams)", kQ}));
    r.push_back(enum_knob(&Policy::quant_scale_precision,
        {"quant_scale_precision", "quant", {"float32", "float64"},
         "precision of s = (max-min)/(qmax-qmin) and of the zero point formed from it (the scale is stored "
         "as float32)",
         "float32", "float32", "float32 (tensor math)", kQ}));
    r.push_back(enum_knob(&Policy::quant_scale_floor,
        {"quant_scale_floor", "quant", {"none", "float32_eps", "tiny_to_one"},
         "what a (near-)zero scale becomes: kept, max(s, float32 eps), or 1 when below float32 tiny",
         "none", "none", "float32_eps (observer eps)", kQ}));
    r.push_back(enum_knob(&Policy::quant_bias,
        {"quant_bias", "quant", {"int32_divide_f64", "int32_mul_reciprocal", "float_in_requant"},
         "bias: int32 round(double(b)/double(s_b)), int32 round(b*(1/s_b)) (s_b = s_in*s_w), or a float added to "
         "the float accumulator before the requantization multiply (b/s_b, or b*bs under reciprocal_scales)",
         "int32_mul_reciprocal (SymmetricPerChannelBiasQuantize)", "int32_mul_reciprocal",
         "int32_mul_reciprocal (qnnpack: quantize_per_tensor(b, s_w*s_in, 0, qint32); onednn, fbgemm: "
         "float_in_requant)",
         "aten/src/ATen/native/quantized/cpu/qconv.cpp; " + kQ}));
    r.push_back(enum_knob(&Policy::quant_bias_product,
        {"quant_bias_product", "quant", {"float32", "float64"},
         "precision of the bias scale s_in*s_w (stored as float32 either way)", "float32", "float32",
         "float64 (q_scale() * act_scale: doubles)", "aten/src/ATen/native/quantized/cpu/qconv.cpp"}));
    r.push_back(enum_knob(&Policy::quant_requant,
        {"quant_requant", "quant",
         {"fixed_point_double_rounding", "fixed_point_single_rounding", "float_multiply", "float_multiply_add_zp"},
         "int32 accumulator to int8: gemmlowp fixed-point multiplier (two roundings or one), float multiply "
         "then round then + zp, or float multiply + zp then round (oneDNN)",
         "fixed_point_double_rounding (MultiplyByQuantizedMultiplier)", "fixed_point_double_rounding",
         "float_multiply (qnnpack q8gemm; onednn: float_multiply_add_zp)",
         "tensorflow/lite/kernels/internal/common.h; aten/src/ATen/native/quantized/cpu/qnnpack/src/q8gemm"}));
    r.push_back(enum_knob(&Policy::quant_multiplier,
        {"quant_multiplier", "quant", {"float32_divide", "float32_mul_reciprocal", "float64", "reciprocal_scales"},
         "how M = s_in*s_w/s_out is formed", "float64 (double products, conv)", "float64",
         "float32_mul_reciprocal (qnnpack; onednn: reciprocal_scales)",
         "tensorflow/lite/kernels/kernel_util.cc PopulateConvolutionQuantizationParams; "
         "aten/src/ATen/native/quantized/cpu/QnnpackUtils.h generate_requantization_scales"}));
    r.push_back(enum_knob(&Policy::quant_add,
        {"quant_add", "quant", {"fixed_point_shift", "float_fma_tail64", "tflite_fixed_point", "ort_qlinear_add"},
         "the int8 residual add: qnnpack's fixed point (shift 21 - exponent), ATen's x86 float kernel (fma body, "
         "scalar tail of numel % 64), ONNX Runtime's QLinearAdd (MLAS AVX2: float32 ratios s/s_y, "
         "fma(a, r_a, fma(b, r_b, F)) on the stored ints, int8 run as uint8 + 128 on x86), TFLite's builtin "
         "int8 ADD (left shift 20, the three multipliers below one in double, double-rounding fixed point per "
         "input and for the sum)",
         "tflite_fixed_point", "tflite_fixed_point",
         "fixed_point_shift (qnnpack; onednn, fbgemm: float_fma_tail64; ort: ort_qlinear_add)",
         "aten/src/ATen/native/quantized/cpu/qnnpack/src/requantization (add params); "
         "aten/src/ATen/native/quantized/cpu/kernels/QuantizedOpKernels.cpp qadd_kernel; "
         "onnxruntime/core/mlas/lib/intrinsics/avx2/qladd_avx2.cpp; tflite/kernels/add.cc Prepare and "
         "kernels/internal/reference/integer_ops/add.h (docs/research/tflite_int8_add_mean_pool.md)"}));
    r.push_back(enum_knob(&Policy::quant_avg_pool,
        {"quant_avg_pool", "quant",
         {"float_reciprocal", "tflite_integer_mean", "tflite_rounded_division", "ort_qlinear_global_avg_pool"},
         "int8 global average pooling: round((sum - N*zp) * (1/N)) + zp (PyTorch, channels-last input), ORT's "
         "QLinearGlobalAveragePool (own output scale: round((sum - N*zp_in) * s_in/(s_out*N)) + zp_out), TFLite's "
         "MEAN over H,W with its own output scale: TF >= 2.13's integer QuantizedMeanOrSum (N folded into the "
         "fixed-point multiplier of s_in/s_out by integer division, double rounding) or TF <= 2.12's reference "
         "integer Mean (the multiplier without N, then a division by N rounded half away)",
         "tflite_integer_mean (Keras GlobalAveragePooling2D -> MEAN, TF >= 2.13)",
         "tflite_integer_mean (Keras GlobalAveragePooling2D -> MEAN, TF >= 2.13)",
         "float_reciprocal (ort: ort_qlinear_global_avg_pool)",
         "aten/src/ATen/native/quantized/cpu/AdaptiveAveragePooling.cpp; onnxruntime/core/mlas/lib/qlgavgpool.cpp; "
         "tflite/kernels/reduce.cc PrepareMeanOrSum/EvalMean, kernels/internal/reference/reduce.h "
         "QuantizedMeanOrSum, TF <= 2.12 reference/integer_ops/mean.h (docs/research/tflite_int8_add_mean_pool.md "
         "section 3)"}));
    r.push_back(enum_knob(&Policy::quant_u8s8_dot,
        {"quant_u8s8_dot", "quant", {"exact", "int16_pairs_channels", "int16_pairs_hwc"},
         "how an int8 conv/dense sums its u8 x s8 products: the integer sum of (x - zp) * w (ARM, x86 with "
         "AVX-512 VNNI or AVX-VNNI, reference kernels), or as x86 without VNNI runs them (VPMADDUBSW): stored "
         "uint8 values times int8 weights, two products added into an int16 with saturation, zp * sum(w) "
         "subtracted after; oneDNN pairs input channels 2j, 2j+1 of one tap (uint8 activations only), ONNX "
         "Runtime's MLAS adjacent terms of the (kh, kw, c) im2col row (padding taps read the zero point; int8 "
         "activations run as uint8 + 128); dense: inputs 2j, 2j+1. Equal unless a pair leaves int16. A CPU "
         "property, not a scheme's: every scheme sets exact",
         "exact", "exact",
         "exact (VNNI CPUs; on x86 without VNNI torch_onednn runs int16_pairs_channels, ort int16_pairs_hwc)",
         "oneDNN dev guide 'Nuances of int8 computations'; onnxruntime docs performance/model-optimizations/"
         "quantization (VPMADDUBSW saturation); onnxruntime/core/mlas/lib/qgemm_kernel_avx2.cpp; "
         "docs/QUANT_SOURCES.md section S2.9"}));
    r.push_back(enum_knob(&Policy::quant_relu,
        {"quant_relu", "quant", {"fused", "separate"},
         "ReLU after conv/dense: the output clamp at the zero point (its range observed after the ReLU), or "
         "its own int8 op after an output quantized with the pre-ReLU range",
         "fused (fused_activation_function)", "fused", "fused (fuse_modules: ConvReLU2d, LinearReLU)", kQ}));
    const std::string kDyn = "aten/src/ATen/native/quantized/cpu/qlinear_dynamic.cpp, quant_utils.h "
                             "ChooseQuantizationParams; aten/src/ATen/native/RNN.cpp (QuantizedCellParamsDynamic, "
                             "FullLayer); tensorflow/lite/kernels/lstm_eval.cc (hybrid); onnxruntime "
                             "DynamicQuantizeLinear";
    r.push_back(enum_knob(&Policy::quant_dyn_act,
        {"quant_dyn_act", "quant", {"affine_double", "affine_float", "symmetric_per_row", "affine_per_row"},
         "dynamic (weights-only) quantization: how a dense/LSTM/GRU layer's float input is quantized at each call: "
         "one uint8 scale and zero point over the whole call in double (ChooseQuantizationParams) or float32 "
         "(DynamicQuantizeLinear), or int8 per row, symmetric (r = max|x|, s = r/127) or asymmetric (double "
         "scale, zero point added before the rounding)",
         "affine_per_row (hybrid kernels, asymmetric_quantize_inputs)", "affine_per_row",
         "affine_double (quantize_dynamic)", kDyn}));
    r.push_back(enum_knob(&Policy::quant_dyn_gru,
        {"quant_dyn_gru", "quant", {"int8", "float32"},
         "dynamic quantization of GRU layers: converted (int8 products) or left float (ONNX Runtime's "
         "quantize_dynamic registers no GRU quantizer)",
         "int8 (the GRU's FC ops become hybrid)", "int8", "int8 (quantize_dynamic: nn.GRU)",
         "onnxruntime/python/tools/quantization/registry.py"}));
    r.push_back(enum_knob(&Policy::quant_dyn_range,
        {"quant_dyn_range", "quant", {"full", "reduced"},
         "dynamic quantization: the input's scale chosen for uint8 0..255 or 0..127 (reduce_range=True, which "
         "quantize_dynamic passes and qnnpack ignores)",
         "full", "full", "full (qnnpack; onednn, fbgemm: reduced)", kDyn}));
    r.push_back(enum_knob(&Policy::quant_dyn_weights,
        {"quant_dyn_weights", "quant", {"per_tensor", "per_gate", "per_channel"},
         "dynamic quantization: int8 weight scales per tensor (each of W_ih, W_hh, the dense W), per gate block of "
         "an LSTM/GRU weight (dense layers: per tensor), or per output row",
         "per_gate (fused LSTM: a scale per gate matrix)", "per_gate", "per_tensor (default_dynamic_qconfig)",
         kDyn + "; tensorflow/compiler/mlir/lite/transforms/prepare_quantize_dynamic_range.cc"}));
    r.push_back(enum_knob(&Policy::quant_dyn_output,
        {"quant_dyn_output", "quant", {"scale_then_bias", "prescaled_bias"},
         "dynamic quantization: float output float(acc)*(s_x*s_w) + b, or (float(acc) + b*bs)*(1/bs) with "
         "bs = (1/s_x)*(1/s_w) (oneDNN's pre-scaled bias)",
         "scale_then_bias", "scale_then_bias", "scale_then_bias (qnnpack, fbgemm; onednn: prescaled_bias)", kDyn}));
    r.push_back(enum_knob(&Policy::quant_dyn_input_proj,
        {"quant_dyn_input_proj", "quant", {"whole_sequence", "per_step"},
         "dynamic quantization of an LSTM/GRU: the input projection x W_ih^T quantizes the whole (T*N, F) "
         "sequence with one scale (PyTorch on CPU), or each step's (N, F) on its own",
         "per_step", "per_step", "whole_sequence (RNN.cpp FullLayer pre-computes the input on CPU)", kDyn}));
    r.push_back(enum_knob(&Policy::rng_engine,
        {"rng_engine", "random", {"mt19937_u24", "philox_u23", "mrg31k3p"},
         "random engine and float conversion used by initialisers and dropout",
         "philox_u23: Philox4x32-10, 23 mantissa bits", "mrg31k3p: MRG_RandomStreams",
         "mt19937_u24: (r32 & 0xFFFFFF) * 2^-24",
         "tensorflow/core/lib/random/random_distributions.h; theano/sandbox/rng_mrg.py; "
         "aten/src/ATen/core/TransformationHelper.h"}));
    r.push_back(enum_knob(&Policy::shuffle,
        {"shuffle", "random", {"forward_modulo", "backward_rejection", "none"},
         "per-epoch shuffle of the training set (its own MT19937 stream)",
         "backward_rejection: np.random.shuffle (Fisher-Yates from the end, bit-mask rejection)",
         "backward_rejection (Keras fit)", "forward_modulo: torch.randperm (Fisher-Yates forward, random()%(n-i))",
         "keras/engine/training_arrays.py@2.2.4; numpy randomkit rk_interval; aten/src/ATen/native/TensorFactories.cpp randperm_cpu"}));
    const std::vector<std::string> kLibBackends = {"reference", "eigen", "onednn"};
    const std::vector<std::string> kOwnBackends = {"reference", "fast"};
    r.push_back(backend_knob(&Policy::conv_backend,
        {"conv_backend", "numerics", kLibBackends, "CPU kernel for convolution (forward and both backward passes)",
         "onednn (TF's CPU conv is an Eigen contraction over (kernel column, row, channel) with MKL-DNN's sgemm as "
         "its block kernel: no kernel here has its order; eigen is not closer)",
         "onednn (CorrMM is im2col + the linked BLAS's sgemm: no kernel here has its order)",
         "onednn (mkldnn convolution)",
         "tensorflow/core/kernels/conv_ops.cc, eigen_spatial_convolutions.h, eigen_contraction_kernel.h; "
         "theano/tensor/nnet/corr.py; aten/src/ATen/native/mkldnn/Conv.cpp"}));
    r.push_back(enum_knob(&Policy::conv_algorithm,
        {"conv_algorithm", "numerics", {"direct", "winograd"},
         "how convolutions form their sums: direct (the products of the definition, summed) or winograd "
         "(oneDNN's F(4x4,3x3) Winograd primitives wherever oneDNN has one for the layer: 3x3, stride 1, no "
         "dilation, groups 1, float32; direct elsewhere): fewer multiplications, another rounding. "
         "conv_backend=onednn only; refused on --device cuda",
         "direct (TF's CPU convolution: an Eigen contraction)", "direct (CorrMM: im2col + sgemm)",
         "direct (mkldnn convolution: ONEDNN_VERBOSE over torch.nn.Conv2d shows alg:convolution_direct)",
         "aten/src/ATen/native/mkldnn/Conv.cpp; bench/bm_conv_algorithms.cpp (both algorithms, speed and error)"}));
    r.push_back(backend_knob(&Policy::gemm_backend,
        {"gemm_backend", "numerics", kLibBackends,
         "CPU kernel for the matrix products of dense layers (LSTM/GRU products belong to their own kernel: rnn_backend)",
         "onednn (TF's MatMul is an Eigen contraction with MKL-DNN's sgemm as its block kernel)",
         "onednn (Theano's dot: the linked BLAS's sgemm)", "onednn: dnnl_sgemm (PyTorch: MKL/OpenBLAS sgemm)",
         "tensorflow/core/kernels/matmul_op_impl.h; aten/src/ATen/native/LinearAlgebra.cpp"}));
    // driftlab's own CPU kernels: each framework runs its own vectorised kernels for these ops;
    // what the knob changes is the summation order (rnn, batchnorm) or only the speed (the rest:
    // their fast kernels give the reference's bits, tests/ops).
    const std::string kOwn = "driftlab kernels/cpu (no framework counterpart: an implementation choice)";
    r.push_back(backend_knob(&Policy::conv_block_backend,
        {"conv_block_backend", "numerics", kOwnBackends,
         "CPU kernel for a conv -> activation -> max-pool run of layers (LeNet's blocks): reference runs the three "
         "layers on their own kernels (conv_backend, act_backend, pool_backend); fast runs them as one op per image "
         "where kernels/cpu/fast/conv_block_fast.cpp supports the block (float32, stride 1, small channel counts; describe() "
         "says which blocks run fused), with other convolution sums than conv_backend's",
         "fast", "fast", "fast", kOwn}));
    r.push_back(backend_knob(&Policy::rnn_backend,
        {"rnn_backend", "numerics", kOwnBackends,
         "CPU kernel for LSTM/GRU layers: reference loops, or the fast kernel (tiled products with the cell math "
         "fused; float32; other sums than the reference's)",
         "fast", "fast", "fast", kOwn}));
    r.push_back(backend_knob(&Policy::bn_backend,
        {"bn_backend", "numerics", kOwnBackends,
         "CPU kernel for BatchNorm: reference (sums in acc_order) or fast (float32; SIMD row sums added in double)",
         "fast", "fast", "fast", kOwn}));
    r.push_back(backend_knob(&Policy::pool_backend,
        {"pool_backend", "numerics", kOwnBackends,
         "CPU kernel for max, average and global average pooling (fast: the reference's bits, OpenMP over planes)",
         "fast", "fast", "fast", kOwn}));
    r.push_back(backend_knob(&Policy::act_backend,
        {"act_backend", "numerics", kOwnBackends,
         "CPU kernel for relu/tanh/sigmoid/hard sigmoid (fast: the reference's bits, OpenMP and vectorised)",
         "fast", "fast", "fast", kOwn}));
    r.push_back(backend_knob(&Policy::loss_backend,
        {"loss_backend", "numerics", kOwnBackends,
         "CPU kernel for softmax cross-entropy (fast: the reference's bits, rows over OpenMP threads)",
         "fast", "fast", "fast", kOwn}));
    r.push_back(backend_knob(&Policy::sgd_backend,
        {"sgd_backend", "numerics", kOwnBackends,
         "CPU kernel for the SGD step (fast: the reference's bits, OpenMP over large tensors)",
         "fast", "fast", "fast", kOwn}));
    r.push_back(backend_knob(&Policy::quant_backend,
        {"quant_backend", "numerics", {"reference", "fast", "onednn"},
         "CPU kernel for the int8 ops of a quantized model (every backend gives the reference's bits: integer "
         "sums are exact)",
         "fast", "fast", "fast", kOwn}));
    r.push_back(enum_knob(&Policy::acc_order,

        {"acc_order", "numerics", {"ascending", "descending", "pairwise"},
         "summation order inside the reference kernels (fast kernels use their library's order)",
         "n/a (library order)", "n/a (library order)", "n/a (library order)", "driftlab kernels/cpu/ref"}));
    r.push_back(enum_knob(&Policy::dtype,
        {"dtype", "numerics", {"float32", "float64"}, "floating-point type of weights and activations",
         "float32 (floatx)", "float32 (Keras casts; raw Theano floatX defaults to float64)", "float32",
         "keras/backend/common.py@2.2.4 _FLOATX; theano/configdefaults.py floatX"}));
    r.push_back(enum_knob(&Policy::math_conv,
        {"math_conv", "numerics", {"float32", "tf32", "bfloat16", "float16"},
         "math mode of float32 convolutions, forward and both gradients: operands rounded to TF32 "
         "(result float32), or operands and result rounded to bfloat16 / float16 (an autocast op), "
         "float32 accumulation; emulated on the CPU",
         "float32 (on the CPU; TF >= 2.4 on an Ampere+ GPU: tf32)", "float32",
         "float32 (on the CPU; on a GPU cudnn.allow_tf32 = True lets cuDNN pick TF32 kernels: tf32_conv)",
         "tensorflow/python/framework/config.py@2.4 enable_tensor_float_32_execution; "
         "torch/backends/cudnn/__init__.py allow_tf32; torch/amp/autocast_mode.py"}));
    r.push_back(enum_knob(&Policy::math_matmul,
        {"math_matmul", "numerics", {"float32", "tf32", "bfloat16", "float16"},
         "math mode of float32 dense layers (their matmuls), forward and both gradients, as math_conv",
         "float32 (on the CPU; TF >= 2.4 on an Ampere+ GPU: tf32)", "float32",
         "float32 (torch.backends.cuda.matmul.allow_tf32 = False since 1.12)",
         "tensorflow/python/framework/config.py@2.4; torch/backends/cuda/__init__.py; torch/amp/autocast_mode.py"}));
    r.push_back(enum_knob(&Policy::math_rnn,
        {"math_rnn", "numerics", {"float32", "tf32", "bfloat16", "float16"},
         "math mode of the LSTM / GRU gate products (the GEMMs of x W_ih^T and h W_hh^T per step, and of "
         "their gradients): operands rounded to TF32, bfloat16 or float16, float32 accumulation, the "
         "products, the cell's elementwise math and the states float32 (float16: cuDNN's "
         "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION on a float32 RNN); emulated on the CPU by the reference "
         "rnn kernel",
         "float32 (on the CPU; TF >= 2.4 on an Ampere+ GPU: tf32, cuDNN's RNN with tensor-op math)", "float32",
         "float32 (on the CPU; on a GPU cudnn.allow_tf32 = True lets cuDNN's RNN use TF32: tf32_conv)",
         "aten/src/ATen/native/cudnn/RNN.cpp (RNNDescriptorParams::descriptor passes allowTF32CuDNN); "
         "aten/src/ATen/cudnn/Descriptors.h (RNNDescriptor::set math type); "
         "tensorflow/stream_executor/cuda/cuda_dnn.cc (IsTensorMathEnabled: float needs TF32 enabled); "
         "cuDNN legacy API cudnnSetRNNMatrixMathType(CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION): float32 data "
         "converted to float16 for tensor cores (tensorflow/tensorflow#36036)"}));
    r.push_back(enum_knob(&Policy::tf32_rounding,
        {"tf32_rounding", "numerics", {"nearest_even", "nearest_away", "truncate"},
         "how math_conv / math_matmul = tf32 round an operand to TF32's 10 mantissa bits",
         "nearest_even (cuBLAS, measured on an H200)", "nearest_even", "nearest_even (cuBLAS, measured on an H200)",
         "docs/REDUCED_PRECISION.md (cuBLAS: nearest_even; cuDNN: per kernel); PTX ISA cvt.rna.tf32.f32"}));
    r.push_back(enum_knob(&Policy::conv_bias_rounding,
        {"conv_bias_rounding", "numerics", {"once", "twice"},
         "under a bfloat16 / float16 convolution (math_conv or autocast): once = the bias added to the "
         "float32 accumulator and the sum rounded to the format once; twice = the convolution's result "
         "rounded, then the (rounded) bias added and the sum rounded again",
         "twice (tf.nn.bias_add on the float16 convolution under a mixed policy)", "twice (as tensorflow)",
         "once (on the CPU: oneDNN adds the bias in the primitive; on CUDA cuDNN's result then "
         "output.add_(bias): twice, the torch_gpu variant)",
         "aten/src/ATen/native/Convolution.cpp@v1.13.0 (_convolution: ConvBackend::Cudnn then output.add_); "
         "keras/layers/convolutional.py Conv.call (tf.nn.bias_add)"}));
    r.push_back(enum_knob(&Policy::matmul_bias_rounding,
        {"matmul_bias_rounding", "numerics", {"once", "twice"},
         "under a bfloat16 / float16 dense layer (math_matmul or autocast): as conv_bias_rounding",
         "twice (tf.matmul then tf.nn.bias_add, both float16 under a mixed policy)", "twice (as tensorflow)",
         "once (F.linear is addmm: the bias enters the GEMM's float32 sum, CPU and cuBLAS)",
         "aten/src/ATen/native/Linear.cpp@v1.13.0 (addmm); keras/layers/core/dense.py Dense.call"}));
    r.push_back(enum_knob(&Policy::matmul_sum,
        {"matmul_sum", "numerics", {"float32", "per_term"},
         "under a bfloat16 / float16 dense layer (math_matmul or autocast), how each output's products are "
         "summed: float32 = in float32, rounded to the format once (oneDNN, cuBLAS, tensor cores); per_term "
         "= as ATen's own CPU GEMM: the forward's x W^T a float32 dot product (in ascending order), "
         "rounded once; the gradients' dy W and dy^T x in the format's arithmetic, each product rounded "
         "and the running sum rounded after every term (a sum of ones stops at 256 in bfloat16)",
         "float32 (not studied: TensorFlow's CPU MatMul runs bfloat16 in oneDNN)", "float32 (as tensorflow)",
         "float32 (PyTorch runs a bfloat16 GEMM in oneDNN on a CPU with AVX-512 BW, VL and DQ when "
         "m*k*n > 4096; elsewhere, an AVX2 CPU for one, ATen's own GEMM: per_term)",
         "bench/peers/aten_gemm_probe.py (PyTorch 1.13's bfloat16 mm, addmm and nn.Linear under autocast "
         "with torch.backends.mkldnn disabled, bit for bit; ATen's GEMM: aten/src/ATen/native/cpu/BlasKernel.cpp, "
         "not read here); docs/REDUCED_PRECISION.md"}));
    r.push_back(enum_knob(&Policy::autocast,
        {"autocast", "numerics", {"off", "bfloat16", "float16"},
         "mixed precision as torch.autocast runs it, emulated on the CPU: convolutions and dense layers "
         "(its lower-precision list) take operands and give results in the format; the other layers run "
         "in their input's format (a result rounded to it, and every gradient of a tensor held in it); "
         "the loss in float32",
         "off (Keras mixed_float16 / mixed_bfloat16 policies: the same knob, with this preset's "
         "conv_bias_rounding, matmul_bias_rounding and autocast_input_cast)",
         "off (as tensorflow)",
         "off (torch.autocast(device_type='cpu') defaults to bfloat16, 'cuda' to float16)",
         "aten/src/ATen/autocast_mode.cpp@v1.13.0 (lower_precision_fp and fp32 lists); torch/amp/autocast_mode.py"}));
    r.push_back(enum_knob(&Policy::autocast_input_cast,
        {"autocast_input_cast", "numerics", {"listed_ops", "every_layer"},
         "under autocast, which layers cast their floating inputs to the format: listed_ops = only the "
         "ops on autocast's lower-precision list (a layer before the model's first convolution or dense "
         "layer runs in float32 on the float32 input); every_layer = every layer, so the model's input is "
         "rounded to the format before its first layer, whatever its kind, and its gradient (dL/dx) is "
         "the format's",
         "every_layer (Layer.__call__ casts floating inputs to the policy's compute dtype)",
         "every_layer (as tensorflow)",
         "listed_ops (torch.autocast casts where an op on its lists runs)",
         "keras/engine/base_layer.py (Layer.__call__, _maybe_cast_inputs; tensorflow/python/keras/engine/"
         "base_layer_utils.py enable_v2_dtype_behavior: layers cast inputs to the policy's compute_dtype); "
         "aten/src/ATen/autocast_mode.cpp@v1.13.0"}));
    r.push_back(enum_knob(&Policy::rnn_autocast_rule,
        {"rnn_autocast_rule", "numerics", {"ops", "layer"},
         "an LSTM / GRU under autocast: ops = the layer's own ops under autocast's lists (its gate "
         "products addmm in the format, the gate sums and activations in the format, the cell state, the "
         "new state and the output float32; each gradient in its tensor's dtype, the recurrent weight "
         "gradients summed over the steps in the format); layer = the whole layer one op in the format, "
         "its states too (not built: refused under autocast)",
         "layer (a mixed policy's LSTM / GRU computes in its compute dtype, states included)",
         "layer (as tensorflow)",
         "ops (CPU autocast inside nn.LSTM / nn.GRU; on CUDA _cudnn_rnn is one lower-precision op: layer, "
         "the torch_gpu variant)",
         "bench/peers/rnn_autocast_probe.py (PyTorch 1.13's CPU autocast written op by op, bit for bit); "
         "aten/src/ATen/autocast_mode.cpp@v1.13.0 (_cudnn_rnn in the CUDA lower_precision_fp list); "
         "keras/layers/recurrent.py (the cell's compute dtype)"}));
    r.push_back(enum_knob(&Policy::rnn_input_bias_rounding,
        {"rnn_input_bias_rounding", "numerics", {"once", "twice"},
         "under rnn_autocast_rule=ops, where the input projection x W_ih^T (over the whole sequence) adds "
         "b_ih: once inside the product's float32 sum (a contiguous time-major input: at::linear folds it "
         "into one addmm), twice = the product rounded, then b_ih added in the format (batch_first=True "
         "hands linear a transposed view: matmul, then add). The recurrent product's bias is always inside",
         "twice (inert: rnn_autocast_rule=layer)", "twice (inert: rnn_autocast_rule=layer)",
         "twice (nn.LSTM / nn.GRU with batch_first=True, as driftlab's torch-side models; once for "
         "batch_first=False)",
         "aten/src/ATen/native/Linear.cpp@v1.13.0 (linear: addmm for a contiguous 3-D input, else matmul "
         "then add_); bench/peers/rnn_autocast_probe.py"}));
    r.push_back(enum_knob(&Policy::loss_scale,
        {"loss_scale", "numerics", {"none", "static", "dynamic"},
         "loss scaling in training: none; static (the loss gradient times loss_scale_init, the gradients "
         "divided by it before the optimizer, nothing skipped); or the dynamic rule (as static, but a step "
         "with an inf/NaN gradient is skipped and the scale halved, down to loss_scale_min; after "
         "loss_scale_growth_interval finite steps it doubles)",
         "none (Keras LossScaleOptimizer: dynamic=True the dynamic rule, initial scale 2^15; "
         "dynamic=False static)", "none",
         "none (torch.cuda.amp.GradScaler: the dynamic rule, init_scale 2^16; static: the loss multiplied "
         "by hand)",
         "torch/cuda/amp/grad_scaler.py@v1.13.0; aten/src/ATen/native/cuda/AmpKernels.cu; "
         "keras/mixed_precision/loss_scale_optimizer.py"}));
    r.push_back({{"loss_scale_init", "numerics", {}, "the dynamic loss scale's initial value",
                  "32768 (LossScaleOptimizer initial_scale)", "32768", "65536 (GradScaler init_scale)",
                  "torch/cuda/amp/grad_scaler.py@v1.13.0; keras/mixed_precision/loss_scale_optimizer.py"},
                 double_accessor(&Policy::loss_scale_init, "loss_scale_init", 1e-30, 3.4e38)});
    r.push_back({{"loss_scale_growth_interval", "numerics", {},
                  "finite steps in a row after which the dynamic loss scale doubles (a whole number >= 1)",
                  "2000 (dynamic_growth_steps)", "2000", "2000 (growth_interval)",
                  "torch/cuda/amp/grad_scaler.py@v1.13.0; keras/mixed_precision/loss_scale_optimizer.py"},
                 double_accessor(&Policy::loss_scale_growth_interval, "loss_scale_growth_interval", 0.0, 1e12)});
    r.push_back({{"loss_scale_min", "numerics", {},
                  "the floor of the dynamic loss scale's backoff (0: none)",
                  "1 (tf.maximum(current_loss_scale / multiplier, 1))", "1 (as tensorflow)",
                  "0 (GradScaler multiplies by backoff_factor with no floor)",
                  "keras/mixed_precision/loss_scale_optimizer.py _DynamicLossScaleState.update; "
                  "aten/src/ATen/native/cuda/AmpKernels.cu"},
                 double_accessor(&Policy::loss_scale_min, "loss_scale_min", 0.0, 3.4e38)});
    r.push_back(enum_knob(&Policy::loss_scale_skipped_step,
        {"loss_scale_skipped_step", "numerics", {"idle", "counted"},
         "what a step the dynamic loss scale skips does to the optimizer: idle (its step count stays: "
         "Adam's bias correction does not move) or counted (the step count advances, the moments stay); "
         "the rate schedule moves either way",
         "counted (do_not_apply_fn: optimizer.iterations.assign_add(1))", "counted (as tensorflow)",
         "idle (GradScaler.step does not call optimizer.step(); scheduler.step() is the loop's)",
         "keras/mixed_precision/loss_scale_optimizer.py _apply_gradients_cross_replica; "
         "torch/cuda/amp/grad_scaler.py@v1.13.0 step"}));
    r.push_back(enum_knob(&Policy::cuda_kernels,
        {"cuda_kernels", "cuda", {"own", "vendor"},
         "--device cuda: driftlab's own CUDA kernels, or cuBLAS gemm + cuDNN conv/pool/BatchNorm/softmax",
         "vendor (cuDNN/cuBLAS through StreamExecutor)", "vendor (gpuarray dnn_conv, cuBLAS gemm)",
         "vendor (cuDNN/cuBLAS)",
         "tensorflow/stream_executor/cuda/cuda_dnn.cc; theano/gpuarray/dnn.py; aten/src/ATen/native/cudnn/Conv_v7.cpp"}));
    r.push_back({{"tf32_matmul", "cuda", {"true", "false"},
                  "TF32 tensor cores for float32 cuBLAS gemm (CUBLAS_TF32_TENSOR_OP_MATH)",
                  "false (TF 1.x has no TF32; TF >= 2.4 enables it: enable_tensor_float_32_execution)",
                  "false (no TF32)", "false (torch.backends.cuda.matmul.allow_tf32 = False since 1.12)",
                  "torch/backends/cuda/__init__.py; tensorflow/python/framework/config.py@2.4"},
                 bool_accessor(&Policy::tf32_matmul, "tf32_matmul")});
    r.push_back({{"tf32_conv", "cuda", {"true", "false"},
                  "TF32 allowed in float32 cuDNN convolutions (CUDNN_DEFAULT_MATH vs CUDNN_FMA_MATH)",
                  "false (TF 1.x; TF >= 2.4: true)", "false (no TF32)",
                  "true (torch.backends.cudnn.allow_tf32 = True since 1.7)",
                  "torch/backends/cudnn/__init__.py; aten/src/ATen/native/cudnn/Conv_v7.cpp"},
                 bool_accessor(&Policy::tf32_conv, "tf32_conv")});
    r.push_back({{"cuda_deterministic", "cuda", {"true", "false"},
                  "deterministic cuDNN algorithms and no cuBLAS atomics (driftlab's own kernels always are)",
                  "false (TF_DETERMINISTIC_OPS unset)", "false (dnn.conv.algo_bwd_filter may be nondeterministic)",
                  "false (torch.backends.cudnn.deterministic = False)",
                  "torch/backends/cudnn/__init__.py; tensorflow/core/util/env_var.h TF_DETERMINISTIC_OPS"},
                 bool_accessor(&Policy::cuda_deterministic, "cuda_deterministic")});
    r.push_back(enum_knob(&Policy::cudnn_algo_search,
        {"cudnn_algo_search", "cuda", {"heuristic", "exhaustive"},
         "how cuDNN convolution algorithms are chosen: cudnnGetConvolution*Algorithm_v7 vs timing every one (cudnnFind*)",
         "exhaustive (TF_CUDNN_USE_AUTOTUNE defaults to on)",
         "heuristic (dnn.conv.algo_fwd = 'small', a fixed choice; 'time_once' is the autotuner)",
         "heuristic (torch.backends.cudnn.benchmark = False)",
         "tensorflow/core/kernels/conv_ops.cc; theano/gpuarray/dnn.py; aten/src/ATen/native/cudnn/Conv_v7.cpp"}));
    r.push_back(enum_knob(&Policy::cudnn_rnn_algo,
        {"cudnn_rnn_algo", "cuda", {"standard", "torch_heuristic"},
         "cuDNN's RNN algorithm: CUDNN_RNN_ALGO_STANDARD always, or PyTorch's rule (float32 LSTM/GRU: "
         "PERSIST_STATIC_SMALL_H when hidden <= 192 forward, <= 128 backward; else STANDARD)",
         "standard (cuda_dnn.cc ToCudnnRNNAlgo: the default algorithm)",
         "standard (Keras' Theano backend has no cuDNN RNN)",
         "torch_heuristic (RNN.cpp get_algo, use_rnn_persist_small_h, cuDNN >= 8.2.1)",
         "aten/src/ATen/native/cudnn/RNN.cpp get_algo; tensorflow/stream_executor/cuda/cuda_dnn.cc ToCudnnRNNAlgo"}));
    return r;
  }();
  return kRows;
}

const KnobRow& row(const std::string& name) {
  for (const auto& r : rows())
    if (r.info.name == name) return r;
  std::vector<std::string> names;
  for (const auto& r : rows()) names.push_back(r.info.name);
  fail("policy: unknown knob '", name, "' (known: ", join(names, ", "), ")");
}

}  // namespace

const std::vector<KnobInfo>& knob_table() {
  static const std::vector<KnobInfo> kTable = [] {
    std::vector<KnobInfo> t;
    for (const auto& r : rows()) t.push_back(r.info);
    return t;
  }();
  return kTable;
}

const KnobInfo& knob_info(const std::string& name) { return row(name).info; }

std::string Policy::get(const std::string& knob) const { return row(knob).access.get(*this); }
void Policy::set(const std::string& knob, const std::string& value) { row(knob).access.set(*this, value); }

Policy Policy::parse(const std::string& spec) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : spec) {
    if (c == ',') {
      parts.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  parts.push_back(cur);
  check(!parts[0].empty() && parts[0].find('=') == std::string::npos,
        "policy: '", spec, "' must start with a preset (tensorflow, theano, torch)");
  Policy p = preset_named(parts[0]);
  std::set<std::string> given;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string& kv = parts[i];
    auto eq = kv.find('=');
    check(eq != std::string::npos && eq > 0, "policy: '", kv, "' in '", spec, "' is not knob=value");
    const std::string knob = kv.substr(0, eq);
    // A knob given twice is a mistake to report, not a silent "last one wins".
    check(given.insert(knob).second, "policy: knob '", knob, "' given twice in '", spec, "'");
    // quant_scheme resets the whole quant group: a quant_* knob before it would be silently lost.
    if (knob == "quant_scheme")
      for (const std::string& g : given)
        check(g == knob || g.rfind("quant_", 0) != 0, "policy: '", g, "' is given before quant_scheme in '", spec,
              "', which resets every quant_* knob: give quant_scheme first");
    p.set(knob, kv.substr(eq + 1));
  }
  return p;
}

std::string Policy::to_string() const {
  Policy base = preset_named(preset);
  std::string s = preset;
  for (const auto& r : rows()) {
    std::string v = r.access.get(*this);
    if (v == r.access.get(base)) continue;
    s += "," + r.info.name + "=" + v;
    // The quant_* knobs after it print as differences from the toolchain's values (parse applies
    // quant_scheme first, then them).
    if (r.info.name == "quant_scheme") r.access.set(base, v);
  }
  return s;
}

std::string Policy::to_full_string() const {
  std::string s = preset;
  for (const auto& r : rows()) s += "," + r.info.name + "=" + r.access.get(*this);
  return s;
}

std::vector<KnobDiff> diff(const Policy& a, const Policy& b) {
  std::vector<KnobDiff> d;
  for (const auto& r : rows()) {
    std::string va = r.access.get(a), vb = r.access.get(b);
    if (va != vb) d.push_back({r.info.name, va, vb});
  }
  return d;
}

}  // namespace driftlab
