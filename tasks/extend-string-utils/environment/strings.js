function reverse(text) {
  return [...text].reverse().join("");
}

function capitalize(word) {
  return word.charAt(0).toUpperCase() + word.slice(1).toLowerCase();
}

module.exports = { reverse, capitalize };
