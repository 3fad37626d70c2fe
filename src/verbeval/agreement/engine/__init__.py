"""The agreement engine: lengths (contexts longer than a model reads, found before it loads),
encoding (contexts as token ids and target positions), forward_pass (the batched forward pass of a
chunk's contexts), kernels (the torch kernels: float64 softmax, each form's probability and the
masses ranked above and below it), inference (every (group, chunk) of a model prepared, computed and
written), shards (one shard's form statistics) and shardstore (the resumable store of a model's shards).
"""
