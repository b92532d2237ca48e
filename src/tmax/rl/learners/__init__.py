"""The policy's weights, optimizer and their distribution (learner), and the two ways a
micro-batch is laid out over them: packing and sequence parallelism."""
