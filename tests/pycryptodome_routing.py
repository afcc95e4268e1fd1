"""A pytest plugin for tests/test_pycryptodome_selftest.py: pycryptodome's own AES, CTR
and GCM tests, with their ``AES.new`` for ECB, CTR and GCM routed to ``aescl.new`` on
``$AESCL_ROUTED_DEVICE``. Only the test modules see the routing: aescl's host engine
uses pycryptodome itself."""

from __future__ import annotations

import os
from typing import Any

from Crypto.Cipher import AES
from Crypto.SelfTest.Cipher import test_AES, test_CTR, test_GCM

import aescl


class _RoutedAES:
    """The ``Crypto.Cipher.AES`` module as the tests see it."""

    def __getattr__(self, name: str) -> Any:
        return getattr(AES, name)

    @staticmethod
    def new(key: bytes, mode: int, *args: Any, **kwargs: Any) -> Any:
        if mode in (AES.MODE_ECB, AES.MODE_CTR, AES.MODE_GCM):
            return aescl.new(key, mode, *args, device=os.environ["AESCL_ROUTED_DEVICE"],
                             **kwargs)
        return AES.new(key, mode, *args, **kwargs)


for _module in (test_AES, test_CTR, test_GCM):
    _module.AES = _RoutedAES()
