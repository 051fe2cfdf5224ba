"""The compiled world: llgrad.compile's function object, the guards that pick a compiled
entry, the run path of an entry, the autograd node behind compiled outputs, dumps, and the
functional transforms (grad, value_and_grad, vjp).

(`llgrad.compile` the attribute is the function; this package is `sys.modules["llgrad.compile"]`.)"""
