// Every layer class of DRIFTLAB_LAYER_KINDS (engine/layers/visit.h), for a visitor that handles them all.
#pragma once
#include "engine/layers/activation_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/dropout_layer.h"
#include "engine/layers/embedding_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/global_avg_pool_layer.h"
#include "engine/layers/graph_layer.h"
#include "engine/layers/pool_layer.h"
#include "engine/layers/residual_layer.h"
#include "engine/layers/rnn_layer.h"
