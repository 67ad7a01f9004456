// Asio's and Beast's compiled parts, built once for the whole tree: every other file includes
// their headers with BOOST_ASIO_SEPARATE_COMPILATION and BOOST_BEAST_SEPARATE_COMPILATION
// (set for all targets in the top CMakeLists.txt) and so does not compile them again.
#include <boost/asio/impl/src.hpp>
#include <boost/beast/src.hpp>
