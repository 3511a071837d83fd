# Turns one kernels/cuda/*.cu file into host C++ for the CUDA emulation tests (tests/emu):
# every launch `name<T><<<grid, block, shm, stream>>>(args)` becomes the plain call
# `name<T>(args)` (with the shim's grid-stride loop each kernel then runs all its threads'
# iterations in order); sum_squares_kernel's one block of cooperating threads runs as
# sum_squares_host (the shim's phase-by-phase version). Usage: cmake -DIN=x.cu -DOUT=x.cpp -P this
file(READ "${IN}" text)
string(REGEX REPLACE "sum_squares_kernel<T><<<[^>]*>>>" "sum_squares_host<T>" text "${text}")
string(REGEX REPLACE "<<<[^>]*>>>" "" text "${text}")
file(WRITE "${OUT}" "// Generated from ${IN} by tests/emu/launches_to_calls.cmake: do not edit.\n${text}")
