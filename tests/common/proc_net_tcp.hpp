/**
 * @file proc_net_tcp.hpp
 * @brief The TCP sockets the kernel lists in /proc/net/tcp and tcp6, for tests that wait for a program's listener
 *        or connection on a port (neither the programs' output nor their exit says so in time).
 */
#ifndef OPENRDMA_TESTS_PROC_NET_TCP_HPP
#define OPENRDMA_TESTS_PROC_NET_TCP_HPP

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace rdmatest {

/** @brief One line of /proc/net/tcp: addresses as the kernel writes them ("0100007F:1F90"), state in hex. */
struct TcpSocket {
    std::string local;   /**< Local address and port. */
    std::string remote;  /**< Remote address and port. */
    std::string state;   /**< "01" established, "0A" listening, "06" TIME_WAIT, ... */
};

/** @brief The sockets the file @p path (/proc/net/tcp, /proc/PID/net/tcp6, ...) lists; none when it cannot be read. */
inline std::vector<TcpSocket> tcp_sockets(const std::string &path) {
    std::vector<TcpSocket> sockets;
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string slot;
        TcpSocket s;
        fields >> slot >> s.local >> s.remote >> s.state;
        sockets.push_back(std::move(s));
    }
    return sockets;
}

/** @brief True when the address @p address of a TcpSocket has the port @p port. */
inline bool has_port(const std::string &address, uint16_t port) {
    char suffix[8];
    std::snprintf(suffix, sizeof suffix, ":%04X", port);
    return address.size() >= 5 && address.compare(address.size() - 5, 5, suffix) == 0;
}

}  // namespace rdmatest

#endif  // OPENRDMA_TESTS_PROC_NET_TCP_HPP
