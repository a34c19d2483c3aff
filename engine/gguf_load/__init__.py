"""Loading a GGUF file as it ships: its metadata read once, the model built from it with the
quantized matrices left in their blocks (over the file's memory map) and only the small float
tensors (norms, biases) as float32 parameters. `engine.runner` calls `load_gguf`."""
