// The container that driftlab's model files (models/model_file.h) and checkpoints (train/checkpoint.h)
// share, one writer and one reader:
//
//   offset 0   magic, 8 bytes              "DRIFTLAB" / "DLCKPT\r\n"
//          8   version, u32 little-endian
//         12   header length H, u64 little-endian
//         20   the JSON header, H bytes    (what the tensors are, and everything else the file says)
//     20 + H   the tensors' bytes, back to back in the header's order
//   size - 4   CRC-32 (zlib's) of every byte before it, u32 little-endian
//
// read_container checks the size, magic, version, header length and the CRC before it believes
// anything else, then parses the header; the file's own reader checks the header's fields and the
// tensors against the bytes (ContainerHeader::data_start, data_len). Messages name the file and the
// offset. write_file_atomic writes any file so that a kill leaves the old one or the new one.
#pragma once
#include <cstdint>
#include <functional>
#include <istream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"

namespace driftlab {

// What differs between the two files: the magic, the versions read, and the words of the messages.
struct ContainerFormat {
  const char* what;           // the messages' first word: "model file", "checkpoint"
  char magic[8];
  const char* not_one;        // bad magic: "(not a driftlab model)"
  const char* at_least;       // too short: "a model file has at least 24 bytes"
  uint32_t oldest, newest;    // the versions this build reads
  uint64_t max_header;        // a longer JSON header is refused as corrupt
  const char* no_size;        // the size cannot be found: "" or " (not a seekable regular file)"
  // The checkpoint checks both header-length bounds in one message, the model file in two.
  bool one_header_check;
  // The model file's read errors say how far a short read got, the checkpoint's where it began.
  bool read_error_at_end;
};

struct ContainerHeader {
  uint32_t version = 0;
  uint64_t size = 0;        // of the file
  uint64_t header_len = 0;  // H
  nlohmann::json header;
  uint64_t data_start() const { return 20 + header_len; }
  uint64_t data_len() const { return size - 4 - data_start(); }
};

// A run of bytes the caller keeps alive until it is written.
struct ByteSpan {
  const void* data = nullptr;
  uint64_t size = 0;
};

// A container's content before it is framed: the JSON header and the tensors' bytes as spans of
// the tensors' own memory, back to back, so that writing a file copies nothing (a checkpoint of
// VGG-16 was built as three strings of up to 538 MB before it was written).
struct ContainerParts {
  std::string header;
  std::vector<ByteSpan> data;
  uint64_t data_size = 0;
  // Appends n bytes at p (none when n is 0) and returns the offset they start at in the data.
  uint64_t add(const void* p, uint64_t n);
  // Appends t's bytes and returns its entry of the header's "tensors" list: {name, dtype, shape,
  // offset, nbytes} (the model file and the checkpoint list their tensors alike).
  nlohmann::json add_tensor(const std::string& name, const Tensor& t);
};

// magic, version, header, data and the CRC, as one string of bytes.
std::string container_bytes(const ContainerFormat& f, uint32_t version, const std::string& header,
                            const std::string& data);
std::string container_bytes(const ContainerFormat& f, uint32_t version, const ContainerParts& parts);
// The same bytes written to path atomically (write_file_atomic) from the parts' own memory.
void write_container_atomic(const std::string& path, const ContainerFormat& f, uint32_t version,
                            const ContainerParts& parts, const std::function<void()>& halfway = {});
// Checks the file's frame (size, magic, version, header length, CRC) and parses its header.
ContainerHeader read_container(std::istream& in, const std::string& path, const ContainerFormat& f);
// Exactly n bytes at offset `at`; a short read is a read error or a file that changed under us,
// never taken for the end of a file whose size was already checked.
void container_read_at(std::istream& in, uint64_t at, void* dst, uint64_t n, const std::string& path,
                       const ContainerFormat& f);

// zlib's CRC-32 of n bytes continuing from crc (0 to start), for any n: zlib's crc32() takes a
// 32-bit length, which alone would cover only n mod 4 GiB bytes.
uint32_t container_crc32(uint32_t crc, const void* data, uint64_t n);

// Writes bytes to path atomically (temporary PATH.tmp.PID in the same folder + fsync + rename):
// until the rename, path keeps its old content. Shared by every writer. `halfway`, when set, is
// called once half the bytes are in the temporary (the checkpoint writer's kill point for tests).
void write_file_atomic(const std::string& path, const std::string& bytes,
                       const std::function<void()>& halfway = {});
// The same for bytes given as spans, written back to back.
void write_file_atomic(const std::string& path, const std::vector<ByteSpan>& spans,
                       const std::function<void()>& halfway = {});

}  // namespace driftlab
