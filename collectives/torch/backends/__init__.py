"""The torch.distributed backends, ``gloo`` and ``nccl``: :mod:`.dist` holds what they share.
``collectives.torch`` registers both (:mod:`collectives.torch.setup`)."""
