"""pytpp.nn: neural-network building blocks on numpy arrays.

Activations, softmax and dropout (with their backward functions) run on the element-wise TPP
engine, layer_norm and rms_norm (and theirs) on one-pass row kernels; optimizer steps
(sgd_step, adamw_step, split_sgd_step) update parameters in place in one fused pass: any float dtype (float64, float32, bfloat16), any strides, ``out=``, threads over large
arrays. embedding_bag is one gather-reduce kernel over the table's rows (its backward a
race-free scatter-add grouped by row), embedding a parallel gather.

>>> import numpy as np, pytpp
>>> pytpp.nn.relu(np.array([-2.0, 3.0]))
array([0., 3.])
"""
from pytpp.nn._activations import (dropout, dropout_backward, exp, exp_backward, gelu,
                                   gelu_backward, relu, relu_backward, sigmoid, sigmoid_backward,
                                   softmax, softmax_backward, tanh, tanh_backward)
from pytpp.nn._chan_norms import (batch_norm, batch_norm_backward, group_norm,
                                  group_norm_backward)
from pytpp.nn._attention import (multi_head_attention, scaled_dot_product_attention,
                                 scaled_dot_product_attention_backward)
from pytpp.nn._linear import PackedLinear, linear, linear_backward
from pytpp.nn._mlp import PackedMLP, mlp, mlp_backward
from pytpp.nn._bert import bert_layer, bert_layer_weights
from pytpp.nn._norms import layer_norm, layer_norm_backward, rms_norm, rms_norm_backward
from pytpp.nn._optim import adamw_step, sgd_step, split_sgd_step
from pytpp.nn._embedding import embedding, embedding_bag, embedding_bag_backward
from pytpp.nn._conv import (PackedConvWeight, conv1d, conv1d_backward_data,
                            conv1d_backward_weight, conv2d, conv2d_backward_data,
                            conv2d_backward_weight, nchw_to_nhwc, nhwc_to_nchw)
from pytpp.nn._pool import (adaptive_avg_pool2d, avg_pool2d, avg_pool2d_backward, max_pool2d,
                            max_pool2d_backward)

__all__ = ["mlp", "mlp_backward", "bert_layer", "bert_layer_weights", "relu", "gelu", "tanh", "sigmoid", "exp", "softmax", "dropout", "relu_backward",
           "gelu_backward", "tanh_backward", "sigmoid_backward", "exp_backward",
           "softmax_backward", "dropout_backward", "layer_norm", "layer_norm_backward",
           "rms_norm", "rms_norm_backward", "group_norm", "group_norm_backward", "batch_norm",
           "batch_norm_backward", "sgd_step", "adamw_step", "split_sgd_step", "linear",
           "linear_backward", "PackedLinear", "PackedMLP", "scaled_dot_product_attention",
           "scaled_dot_product_attention_backward", "multi_head_attention", "embedding_bag",
           "embedding_bag_backward", "embedding", "conv2d", "conv2d_backward_data",
           "conv2d_backward_weight", "PackedConvWeight", "nchw_to_nhwc", "nhwc_to_nchw",
           "conv1d", "conv1d_backward_data", "conv1d_backward_weight", "max_pool2d",
           "avg_pool2d", "adaptive_avg_pool2d", "max_pool2d_backward", "avg_pool2d_backward"]
